"""The tuning comparison (docs/annex/tuning.md): is the nonlinear query's gain more than its tuning?

Each model is represented by its best setting over the seeds, chosen the same way on both sides,
so the winner's curse favours neither much.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.results import scale_caveat
from repro.analysis.seeds import (
    PAIRED_COLUMNS,
    checked_runs,
    differences_column,
    paired_difference,
    read_seed_runs,
    summarise,
)
from repro.config import ConfigError, Experiment, Preset, load_config, resolve_run, seed_dir

GROUP = "tuning"
TUNING_COLUMNS = [
    "experiment",
    "model",
    "query_mode",
    "mlp_ratio",
    "lr_max",
    "lr_min",
    "weight_decay",
    "step",
    "seeds",
    "n_seeds",
    "n_diverged",
    "n_missing",
    "val_loss_mean",
    "val_loss_sd",
    "val_loss_ci_low",
    "val_loss_ci_high",
    "best",
    "preset",
    "caveat",
    "config_differences",
]
COMPARISON_COLUMNS = [
    "nonlinear",
    "linear",
    "linear_model",
    "step",
    *PAIRED_COLUMNS,
    "preset",
    "caveat",
]


def model_of(experiment: Experiment) -> str:
    """What a setting is a setting of: the query mode, the MLP width, the QK-norm and the gate."""
    qk_norm = " + qk_norm" if experiment.model.get("qk_norm") else ""
    gate = experiment.model.get("attention_gate")
    gate = f" + {gate} gate" if gate else ""
    return f"{experiment.query_mode}{qk_norm}{gate}, MLP h/d {experiment.mlp_ratio:g}"


@dataclass(frozen=True)
class Settings:
    """The settings of a group at one preset: `table`, `losses` at `step` and the `missing` runs."""

    table: pd.DataFrame
    losses: pd.DataFrame
    missing: list[str]
    step: int  # where the runs were read


@dataclass(frozen=True)
class Tuning:
    """The comparison at one preset: Settings' fields and `comparison`, best against best."""

    table: pd.DataFrame
    comparison: pd.DataFrame
    missing: list[str]
    preset: Preset
    losses: pd.DataFrame


def _outcomes(runs_dir, members: list[Experiment], seeds: int, preset: Preset, step: int):
    """One row per run (val_loss at `step`, diverged, missing), and what differs where left out."""
    by_seed = read_seed_runs(runs_dir, [e.name for e in members], seeds)
    by_seed, differing = checked_runs(by_seed, members, preset)
    rows = []
    for k, runs in by_seed.items():
        for e in members:
            run = runs.get(e.name)
            diverged = run is not None and run.status == "diverged"
            loss = np.nan if run is None or diverged else run.loss_at(step)
            rows.append((e.name, k, loss, diverged, not diverged and np.isnan(loss)))
    columns = ["experiment", "seed", "val_loss", "diverged", "missing"]
    return pd.DataFrame(rows, columns=columns), differing


def _best(table: pd.DataFrame, seeds: int) -> pd.Series:
    """Per model, whether a setting is its best: lowest mean loss among the complete settings."""
    eligible = table[(table["n_seeds"] == seeds) & (table["n_diverged"] == 0)]
    best = eligible.groupby("model", sort=False)["val_loss_mean"].idxmin()
    return table.index.isin(best.values)


def last_evaluation(preset: Preset, members: list[Experiment]) -> int:
    """The step of the last evaluation of the members' runs at `preset`, the same for all."""
    steps = {}
    for e in members:
        t = resolve_run(preset, e).train
        steps.setdefault(t.max_step // t.eval_interval * t.eval_interval, []).append(e.name)
    if len(steps) > 1:
        where = "; ".join(f"step {s}: {' '.join(names)}" for s, names in sorted(steps.items()))
        raise ConfigError(
            f"runs evaluate last at different steps at preset {preset.name} ({where})"
        )
    return next(iter(steps))


def settings(
    runs_dir: str | Path,
    preset: Preset,
    seeds: int,
    config_dir,
    members: list[Experiment],
    last: bool = False,
) -> Settings:
    """Each setting's loss over the seeds at the table step, or at the last evaluation (`last`: a
    run that decays to zero is read where its decay ends), and each model's best."""
    step = last_evaluation(preset, members) if last else preset.report.table_step
    outcomes, differing = _outcomes(runs_dir, members, seeds, preset, step)
    by_experiment = outcomes.groupby("experiment", sort=False)
    table = summarise(by_experiment, "val_loss").join(
        by_experiment[["diverged", "missing"]].sum().rename(columns=lambda c: f"n_{c}")
    )
    table = table.loc[[e.name for e in members]].reset_index()
    table = table.assign(
        model=[model_of(e) for e in members],
        query_mode=[e.query_mode for e in members],
        mlp_ratio=[e.mlp_ratio for e in members],
        lr_max=[e.optimizer.lr_max for e in members],
        lr_min=[e.optimizer.lr_min for e in members],
        weight_decay=[e.optimizer.weight_decay for e in members],
        step=step,
        seeds=seeds,
        preset=preset.name,
        caveat=scale_caveat(preset, config_dir),
        config_differences=differences_column(differing, [e.name for e in members]),
    )
    table["best"] = _best(table, seeds)
    missing = outcomes[outcomes["missing"]]
    return Settings(
        table=table[TUNING_COLUMNS],
        losses=outcomes.pivot(index="seed", columns="experiment", values="val_loss"),
        missing=[
            os.path.join(seed_dir("", k), name)
            for name, k in zip(missing["experiment"], missing["seed"])
        ],
        step=step,
    )


def tuning(
    runs_dir: str | Path,
    preset: str | Preset,
    seeds: int = 1,
    config_dir: str | Path | None = None,
    group: str = GROUP,
    last: bool = False,
) -> Tuning:
    """The tuning comparison of `group` from the runs of seeds 0..seeds-1 under runs_dir."""
    preset, experiments = load_config(preset, config_dir)
    result = settings(runs_dir, preset, seeds, config_dir, experiments.group(group), last)
    best = result.table[result.table["best"]]
    linear = best[best["query_mode"] == "linear"]
    comparison = pd.DataFrame(
        [
            paired_difference(result.losses, nonlinear, lin).to_dict()
            | {"nonlinear": nonlinear, "linear": lin, "linear_model": model}
            for nonlinear in best.loc[best["query_mode"] != "linear", "experiment"]
            for lin, model in zip(linear["experiment"], linear["model"])
        ],
        columns=COMPARISON_COLUMNS,
    )
    comparison = comparison.assign(
        step=result.step,
        preset=preset.name,
        caveat=scale_caveat(preset, config_dir),
    )
    return Tuning(
        table=result.table,
        comparison=comparison[COMPARISON_COLUMNS],
        missing=result.missing,
        preset=preset,
        losses=result.losses,
    )
