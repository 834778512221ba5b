"""The workflow's plan: which runs of a preset its default target (`all`) trains, at which seeds,
in which folders. The Snakefile asks for these runs and `repro status` lists those not yet
started as queued, both from here, so that the two cannot disagree.

No torch, pandas or numpy here: the workflow imports this while it is parsed, `repro status`
as it starts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from repro.config.experiments import Experiment, Experiments
from repro.config.preset import Preset, seed_dir
from repro.config.schema import ConfigError, load_outside

TABLE1_GROUP = "table1"  # Table 1's and Figure 1's experiments, trained at every seed
SWEEP_GROUP = "figure2"  # Figure 2's learning-rate sweep, at seed 0
# The workflow's settings and their schema (Snakemake's validate), beside its config folder.
WORKFLOW_CONFIG = "config.yaml"
WORKFLOW_SCHEMA = Path("workflow", "schemas", "config.schema.yaml")


@dataclass(frozen=True)
class PlannedRun:
    preset: str
    experiment: str
    seed: int
    folder: str  # below the runs folder: <preset>/<experiment>, seed k's in <preset>/seed<k>/


def equal_rate_arms(experiments: Experiments, names: list[str]) -> dict[str, str]:
    """The linear query at each nonlinear one's rates: a small preset confounds query and rate."""
    base = experiments[experiments.baseline]
    linear = {}
    for e in experiments.by_name.values():
        if (e.query_mode, e.mlp_ratio, e.model, e.train) == (
            base.query_mode, base.mlp_ratio, base.model, base.train
        ):  # fmt: skip
            linear.setdefault(e.optimizer, e.name)
    return {
        n: linear[experiments[n].optimizer]
        for n in names
        if experiments[n].query_mode != base.query_mode
        and experiments[n].optimizer != base.optimizer
        and experiments[n].optimizer in linear
    }


def table1_experiments(
    preset: Preset, experiments: Experiments, group: str = TABLE1_GROUP
) -> list[Experiment]:
    """A group's Table 1 experiments, plus equal_rate_arms where report.equal_rate asks."""
    members = experiments.group(group)
    if not preset.report.equal_rate:
        return members
    names = [e.name for e in members]
    extra = dict.fromkeys(equal_rate_arms(experiments, names).values())
    return members + [experiments[n] for n in extra if n not in names]


def planned_runs(
    preset: Preset, experiments: Experiments, seeds: int = 1, extra_experiments=()
) -> list[PlannedRun]:
    """The runs `all` trains at a preset: Table 1's (with report.equal_rate's) at seeds 0 to
    seeds - 1, the Figure 2 sweep and the extra experiments at seed 0, each once. An unknown
    extra experiment is a ConfigError naming it."""
    table1 = [e.name for e in table1_experiments(preset, experiments)]
    at_seed_zero = [e.name for e in experiments.group(SWEEP_GROUP)]
    at_seed_zero += [experiments[name].name for name in extra_experiments]
    names = [(seed, name) for seed in range(seeds) for name in table1]
    names += [(0, name) for name in at_seed_zero]
    return [
        PlannedRun(preset.name, name, seed, os.path.join(seed_dir(preset.name, seed), name))
        for seed, name in dict.fromkeys(names)
    ]


def workflow_config(config_dir: str | os.PathLike) -> dict:
    """The workflow's config.yaml in config_dir, checked and defaulted by the workflow's own
    schema (workflow/schemas/, beside config_dir) as Snakemake's validate does; a missing,
    unreadable or invalid one is a one-line ConfigError naming the file."""
    if "\0" in str(config_dir):
        raise ConfigError(f"{str(config_dir)!r}: no folder's name holds a NUL")
    schema_path = Path(config_dir).absolute().parent / WORKFLOW_SCHEMA
    return load_outside(Path(config_dir) / WORKFLOW_CONFIG, schema_path)
