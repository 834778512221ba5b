"""What the figures draw (repro.analysis.plots), computed apart from the drawing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from repro.analysis import compare
from repro.analysis.curves import loss_curves, relative_improvement_curves
from repro.analysis.runs import Run, has_run, read_run, read_runs
from repro.analysis.seeds import BySeed, over_seeds, paired
from repro.analysis.stated import stated_as, stated_configuration
from repro.config import Experiment, Preset
from repro.rundir import RunError


def window(preset: Preset) -> tuple[int, int]:
    """Steps 1k..59k on the paper preset: from the first evaluation after 0 to the table step."""
    return preset.train.eval_interval, preset.report.table_step


def require_baseline(runs: dict, runs_dir, baseline: str) -> str:
    if baseline not in runs:
        raise RunError(f"{Path(runs_dir) / baseline}: the baseline run is missing")
    return baseline


def reference_runs(runs_dir, names: list[str]) -> dict:
    """The imported runs (the authors', the audit's) among `names` in runs_dir, if a folder."""
    if runs_dir is None or not Path(runs_dir).is_dir():
        return {}
    return read_runs(runs_dir, names)


def authors_runs(authors_runs_dir, names: list[str], baseline: str) -> dict:
    """The imported authors' runs among `names` (none without their baseline or a folder)."""
    runs = reference_runs(authors_runs_dir, names)
    return runs if baseline in runs else {}


STATED = "audit's log, configuration stated by the user"  # the label of a log drawn as stated


@dataclass
class StatedLogs:
    """The audit's imported logs a figure draws by what their user stated of them."""

    runs: dict[str, Run] = field(default_factory=dict)  # "<log> as <experiment>" -> its run
    experiment: dict[str, str] = field(default_factory=dict)  # the same keys -> the experiment
    unknown: list[str] = field(
        default_factory=list
    )  # nothing stated, or what fits several: not drawn
    label: str = STATED

    def colors(self, of_experiment: dict) -> dict:
        return {key: of_experiment[name] for key, name in self.experiment.items()}

    def note(self) -> str:
        n = len(self.unknown)
        return f"\n{n} imported log{'s' * (n != 1)} not drawn: configuration unknown" if n else ""


def stated_logs(logs_dir, preset: Preset, members: list[Experiment]) -> StatedLogs:
    """The audit's logs at `preset` stated as one of `members`, and those unstated or ambiguous."""
    found = StatedLogs()
    if logs_dir is None or not Path(logs_dir).is_dir():
        return found
    for log in sorted(p for p in Path(logs_dir).iterdir() if has_run(p)):
        run = read_run(log)
        matches = stated_as(run.record, preset, members)
        if not stated_configuration(run.record) or len(matches) > 1:  # which one: unknown
            found.unknown.append(log.name)
            continue
        for name in matches:
            found.runs[f"{log.name} as {name}"] = run
            found.experiment[f"{log.name} as {name}"] = name
    return found


def mean_losses(by_seed: BySeed, first: int, last: int) -> pd.DataFrame:
    """Evaluation losses per experiment, split and step: mean, 95% interval and n_seeds."""
    curves = lambda runs: loss_curves(runs, first, last)
    return over_seeds(by_seed, curves, ["experiment", "split", "step"], "loss")


def mean_improvements(
    by_seed: BySeed, baseline: str, split: str, first: int, last: int
) -> pd.DataFrame:
    """Relative improvement per experiment and step, paired seed by seed: mean and 95% interval."""
    curves = lambda runs: relative_improvement_curves(
        runs, baseline, split=split, first_step=first, last_step=last
    )
    return over_seeds(paired(by_seed, baseline), curves, ["experiment", "step"], "rel_improvement")


def off_course(losses: pd.DataFrame, by_seed: BySeed, theirs: dict) -> dict[str, pd.DataFrame]:
    """For each reference run, the steps where our mean validation loss leaves its band."""
    off = {}
    for name, their_run in theirs.items():
        seeds = [runs[name] for runs in by_seed.values() if name in runs]
        tolerance = (
            compare.measured_tolerance(seeds) if len(seeds) >= 2 else compare.DEFAULT_TOLERANCE
        )
        ours = losses[(losses["experiment"] == name) & (losses["split"] == "val")]
        table = compare.compare_curves(
            ours.set_index("step")["loss_mean"], their_run.evals()["eval_val_loss"], tolerance
        )
        off[name] = table[table["verdict"].isin(compare.OFF_COURSE)]
    return off


def sweep_series(
    members: list[Experiment], drawn: set, baseline: str
) -> tuple[list[Experiment], list[Experiment]]:
    """Figure 2's series with a run: the nonlinear configurations and the widened controls."""
    nonlinear = [e for e in members if e.query_mode != "linear" and e.name in drawn]
    controls = [
        e for e in members if e.query_mode == "linear" and e.name != baseline and e.name in drawn
    ]
    return nonlinear, controls
