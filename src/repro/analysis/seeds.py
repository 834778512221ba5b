"""Repeated runs: means over seeds 0..N-1 with 95% t-intervals, paired with the baseline.

Seed k of a preset (repro.config.Preset.with_seed) has its own batch indices and its own model
initialisation; its runs are under seed_dir(runs_dir, k). Every experiment of one seed trains on
that seed's batches, so an experiment and the baseline of the same seed are a pair: differences
are taken within each seed, then averaged, and their interval is that of the paired differences.
The interval of a mean of n values with sample standard deviation s is
mean ± t(0.975, n - 1) · s / √n; with one seed there is none (NaN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from repro.analysis.results import Run, read_runs, relative_improvement
from repro.config import Preset, load_config, seed_dir
from repro.config.schema import ConfigError

CONFIDENCE = 0.95
TABLE1_SEEDS_COLUMNS = [
    "experiment",
    "query_mode",
    "mlp_ratio",
    "step",
    "seeds",
    "n_seeds",
    "val_loss_mean",
    "val_loss_sd",
    "val_loss_ci_low",
    "val_loss_ci_high",
    "n_pairs",
    "rel_improvement_mean",
    "rel_improvement_sd",
    "rel_improvement_ci_low",
    "rel_improvement_ci_high",
    "paper_val_loss",
    "paper_rel_improvement",
    "preset",
]

BySeed = dict[int, dict[str, Run]]


def summarise(groups, value: str) -> pd.DataFrame:
    """Per group of a pandas groupby: n_seeds (values that are not NaN) and the mean, standard
    deviation and 95% t-interval (NaN below two values) of `value`, as {value}_mean, ..."""
    s = groups[value].agg(["count", "mean", "std"])
    with np.errstate(divide="ignore", invalid="ignore"):
        half = stats.t.ppf((1 + CONFIDENCE) / 2, s["count"] - 1) * s["std"] / np.sqrt(s["count"])
    return pd.DataFrame(
        {
            "n_seeds": s["count"],
            f"{value}_mean": s["mean"],
            f"{value}_sd": s["std"],
            f"{value}_ci_low": s["mean"] - half,
            f"{value}_ci_high": s["mean"] + half,
        }
    )


def read_seed_runs(runs_dir: str | Path, names: list[str], seeds: int) -> BySeed:
    """The runs of `names` of seeds 0..seeds-1, by seed; missing runs are left out."""
    if seeds < 1:
        raise ConfigError(f"seeds {seeds}: at least 1")
    return {k: read_runs(seed_dir(runs_dir, k), names) for k in range(seeds)}


def paired(by_seed: BySeed, *names: str) -> BySeed:
    """The seeds that have a run of every one of `names`."""
    return {k: runs for k, runs in by_seed.items() if all(n in runs for n in names)}


def over_seeds(
    by_seed: BySeed, curves: Callable[[dict[str, Run]], pd.DataFrame], keys: list[str], value: str
) -> pd.DataFrame:
    """curves(runs) of each seed that has runs, summarised over the seeds per `keys`: one row per
    key (e.g. experiment and step) with `keys`, n_seeds, {value}_mean, _sd, _ci_low, _ci_high."""
    frames = [curves(runs).assign(seed=k) for k, runs in by_seed.items() if runs]
    if not frames:
        return summarise(pd.DataFrame(columns=[*keys, value]).groupby(keys), value).reset_index()
    return summarise(pd.concat(frames).groupby(keys, sort=False), value).reset_index()


def losses_at(by_seed: BySeed, names: list[str], step: int) -> pd.DataFrame:
    """Validation losses at `step`: experiment, seed, val_loss (NaN where the run is missing or
    has no evaluation there)."""
    rows = [
        (n, k, runs[n].loss_at(step) if n in runs else np.nan)
        for n in names
        for k, runs in by_seed.items()
    ]
    return pd.DataFrame(rows, columns=["experiment", "seed", "val_loss"])


def table1_seeds(
    runs_dir: str | Path, preset: str | Preset, seeds: int, config_dir: str | Path | None = None
) -> pd.DataFrame:
    """Table 1 over seeds 0..seeds-1: per experiment, the validation loss at the table step (mean,
    sd, 95% t-interval over the seeds that have it) and the relative improvement over the
    baseline of the same seed (the same over the seeds that have both), beside the paper's."""
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group("table1")
    names = [e.name for e in members]
    losses = losses_at(read_seed_runs(runs_dir, names, seeds), names, preset.report.table_step)
    baseline = losses[losses["experiment"] == experiments.baseline].set_index("seed")["val_loss"]
    losses["rel_improvement"] = relative_improvement(
        losses["val_loss"], losses["seed"].map(baseline)
    )
    groups = losses.groupby("experiment", sort=False)
    gains = summarise(groups, "rel_improvement").rename(columns={"n_seeds": "n_pairs"})
    table = summarise(groups, "val_loss").join(gains).reset_index()
    table = table.assign(
        query_mode=[e.query_mode for e in members],
        mlp_ratio=[e.mlp_ratio for e in members],
        step=preset.report.table_step,
        seeds=seeds,
        preset=preset.name,
        paper_val_loss=[e.paper.val_loss if e.paper else None for e in members],
        paper_rel_improvement=[e.paper.rel_improvement if e.paper else None for e in members],
    )
    return table[TABLE1_SEEDS_COLUMNS]
