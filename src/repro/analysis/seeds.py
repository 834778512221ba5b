"""Repeated runs: means over seeds 0..N-1 with 95% t-intervals, paired with the baseline.

Seed k of a preset (repro.config.Preset.with_seed) has its own batch indices and its own model
initialisation; its runs are under seed_dir(runs_dir, k). Every experiment of one seed trains on
that seed's batches, so an experiment and the baseline of the same seed are a pair: differences
are taken within each seed, then averaged. The interval of a mean of n values with standard
deviation s is mean ± t(0.975, n - 1) · s / √n; with one seed there is none (NaN).

Arms need not be equally noisy: an arm's spread over seeds can be several times another's (a
linear query's 0.0002 against a nonlinear one's 0.0015 in one published audit), so a gap "k
spreads wide" must say whose. Each arm's own spread is reported (val_loss_sd), and a paired
difference is also given in units of the larger of its two arms' spreads (paired_difference:
spread_sd, spread_from, gap_in_spreads). Its interval stays the paired one: the two runs of a
seed share that seed's batches and evaluation sequences, whose shift the pairing cancels and each
arm's own spread contains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from repro.analysis.curves import relative_improvement
from repro.analysis.results import run_differences, table1_experiments
from repro.analysis.runs import Run, read_runs
from repro.config import Experiment, Preset, load_config, seed_dir
from repro.config.schema import ConfigError

CONFIDENCE = 0.95
MAX_SEEDS = 100  # seeds 0..99: a count beyond it is a typing error, and would be read for hours
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
    "spread_sd",
    "spread_from",
    "gap_in_spreads",
    "paper_val_loss",
    "paper_rel_improvement",
    "preset",
    "config_differences",
]

# The columns of a paired difference that the tuning and ablation tables show, in their order.
PAIRED_COLUMNS = [
    "n_pairs",
    "loss_gap_mean",
    "loss_gap_ci_low",
    "loss_gap_ci_high",
    "rel_improvement_mean",
    "rel_improvement_sd",
    "rel_improvement_ci_low",
    "rel_improvement_ci_high",
    "spread_sd",
    "spread_from",
    "gap_in_spreads",
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


def paired_difference(losses: pd.DataFrame, ours: str, reference: str) -> pd.Series:
    """`ours` against `reference` over the seeds that have both (`losses`: one column per
    experiment, one row per seed): n_pairs; the loss gap L_reference - L_ours and the relative
    improvement (L_reference - L_ours) / L_reference, positive where ours is lower, each as
    {value}_mean, _sd, _ci_low, _ci_high over the paired differences; and the gap in units of the
    noisier arm's spread: spread_sd (the larger of the two arms' standard deviations over these
    seeds), spread_from (that arm) and gap_in_spreads (loss_gap_mean / spread_sd)."""
    both = losses[list(dict.fromkeys([ours, reference]))].dropna()
    differences = pd.DataFrame(
        {
            "loss_gap": both[reference] - both[ours],
            "rel_improvement": relative_improvement(both[ours], both[reference]),
        }
    )
    groups = differences.groupby(lambda _: 0)
    row = summarise(groups, "loss_gap").join(
        summarise(groups, "rel_improvement").drop(columns="n_seeds")
    )
    row = row.reindex([0]).iloc[0].drop("n_seeds").to_dict() | {"n_pairs": len(both)}
    arms = both.std()  # each arm's own spread (NaN below two seeds)
    noisier = arms.idxmax() if arms.notna().any() else None
    spread = arms[noisier] if noisier is not None else np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.float64(row["loss_gap_mean"]) / spread
    return pd.Series(row | {"spread_sd": spread, "spread_from": noisier, "gap_in_spreads": gap})


def read_seed_runs(runs_dir: str | Path, names: list[str], seeds: int) -> BySeed:
    """The runs of `names` of seeds 0..seeds-1, by seed; missing runs are left out."""
    check_seed_count(seeds)
    return {k: read_runs(seed_dir(runs_dir, k), names) for k in range(seeds)}


def check_seed_count(seeds: int) -> None:
    """Refuse a count of seeds to read that is not 1..MAX_SEEDS."""
    if not 1 <= seeds <= MAX_SEEDS:
        raise ConfigError(f"seeds {seeds}: a count of seeds is 1..{MAX_SEEDS}")


def checked_runs(
    by_seed: BySeed, members: list[Experiment], preset: Preset
) -> tuple[BySeed, dict[tuple[str, int], str]]:
    """`by_seed` less the runs that do not stand for their experiment at seed k of `preset`
    (results.run_differences: another experiment's run.json, settings edited since), and what
    differs in each of those, by (experiment, seed): a table leaves them out and says why."""
    kept, differing = {}, {}
    for k, runs in by_seed.items():
        seeded = preset.with_seed(k)
        kept[k] = {}
        for e in members:
            if e.name not in runs:
                continue
            differences = run_differences(runs[e.name], e, seeded)
            if differences:
                differing[(e.name, k)] = "; ".join(differences)
            else:
                kept[k][e.name] = runs[e.name]
    return kept, differing


def differences_column(differing: dict[tuple[str, int], str], names: list[str]) -> list[str]:
    """Per experiment of `names`, the runs left out for what their recorded configuration says
    ("seed<k>: ..."; "" where none)."""
    return [
        " | ".join(f"seed{k}: {d}" for (n, k), d in sorted(differing.items()) if n == name)
        for name in names
    ]


def paired(by_seed: BySeed, *names: str) -> BySeed:
    """The seeds that have a run of every one of `names`."""
    return {k: runs for k, runs in by_seed.items() if all(n in runs for n in names)}


def over_seeds(
    by_seed: BySeed, curves: Callable[[dict[str, Run]], pd.DataFrame], keys: list[str], value: str
) -> pd.DataFrame:
    """curves(runs) of each seed that has runs, summarised over the seeds per `keys`: one row per
    key (e.g. experiment and step) with `keys`, n_seeds, {value}_mean, _sd, _ci_low, _ci_high,
    and the seeds' range, _min and _max."""
    frames = [curves(runs).assign(seed=k) for k, runs in by_seed.items() if runs]
    groups = pd.concat(frames or [pd.DataFrame(columns=[*keys, value])]).groupby(keys, sort=False)
    spread = groups[value].agg(["min", "max"]).add_prefix(f"{value}_")
    return summarise(groups, value).join(spread).reset_index()


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
    members = table1_experiments(preset, experiments)
    names = [e.name for e in members]
    by_seed, differing = checked_runs(read_seed_runs(runs_dir, names, seeds), members, preset)
    losses = losses_at(by_seed, names, preset.report.table_step)
    by_seed = losses.pivot(index="seed", columns="experiment", values="val_loss")
    gains = pd.DataFrame(
        [paired_difference(by_seed, name, experiments.baseline) for name in names], index=names
    ).filter(regex="^(n_pairs|rel_improvement_|spread_|gap_in_spreads)")
    table = summarise(losses.groupby("experiment", sort=False), "val_loss").join(gains)
    table = table.rename_axis("experiment").reset_index()
    table = table.assign(
        query_mode=[e.query_mode for e in members],
        mlp_ratio=[e.mlp_ratio for e in members],
        step=preset.report.table_step,
        seeds=seeds,
        preset=preset.name,
        paper_val_loss=[e.paper.val_loss if e.paper else None for e in members],
        paper_rel_improvement=[e.paper.rel_improvement if e.paper else None for e in members],
        config_differences=differences_column(differing, names),
    )
    return table[TABLE1_SEEDS_COLUMNS]
