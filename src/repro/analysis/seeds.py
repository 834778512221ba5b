"""Repeated runs: means over seeds 0..N-1 with 95% t-intervals, paired with the baseline.

Every experiment of one seed trains on that seed's batches, so an experiment and the baseline of
the same seed are a pair: differences are taken within each seed, then averaged; with one seed
there is no interval (NaN). Arms need not be equally noisy (0.0002 against 0.0015 in one audit),
so a gap is also given in units of the noisier arm's spread; its interval stays the paired one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from repro.analysis.curves import relative_improvement
from repro.analysis.results import run_differences, val_bpb
from repro.analysis.runs import Run, read_runs
from repro.config import Experiment, Preset, load_config, seed_dir
from repro.config.plan import table1_experiments
from repro.config.schema import ConfigError

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE  # a p-value below it: the interval at CONFIDENCE excludes zero
# Below three seeds a t-test has one degree of freedom or none: no claim carries a p-value there.
MIN_SEEDS_FOR_P = 3
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
    "val_bpb_mean",  # bits per byte of the sequences evaluated (results.val_bpb)
    "val_bpb_ci_low",
    "val_bpb_ci_high",
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


def paired_p_value(mean: float, sd: float, n: int) -> float:
    """The two-sided p-value of a paired t-test of mean differences over `n` seeds (NaN below
    MIN_SEEDS_FOR_P): below ALPHA exactly where the paired 95% interval excludes zero."""
    if not n >= MIN_SEEDS_FOR_P or not (np.isfinite(mean) and np.isfinite(sd)):
        return np.nan
    if sd == 0:
        return 0.0 if mean != 0 else 1.0
    return float(2 * stats.t.sf(abs(mean) / (sd / np.sqrt(n)), n - 1))


def holm(p_values) -> np.ndarray:
    """Holm's step-down correction of the p-values checked together (NaN: not tested, kept NaN):
    the k-th smallest of m is multiplied by m - k + 1, and no corrected value falls below an
    earlier one's. It holds the chance of any false claim among them to ALPHA."""
    p = np.asarray(p_values, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    m = len(order)
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    corrected = np.full(p.shape, np.nan)
    corrected[order] = np.maximum.accumulate(scaled) if m else scaled
    return corrected


def paired_difference(losses: pd.DataFrame, ours: str, reference: str) -> pd.Series:
    """`ours` against `reference` over the seeds that have both: the loss gap and the relative
    improvement, positive where ours is lower, with their paired intervals; and the gap in units
    of the noisier arm's spread (spread_sd, spread_from, gap_in_spreads)."""
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
    if not 1 <= seeds <= MAX_SEEDS:
        raise ConfigError(f"seeds {seeds}: a count of seeds is 1..{MAX_SEEDS}")


def checked_runs(
    by_seed: BySeed, members: list[Experiment], preset: Preset
) -> tuple[BySeed, dict[tuple[str, int], str]]:
    """`by_seed` less the runs that do not stand for their experiment, and what differs in each."""
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
    """Per experiment of `names`, the runs left out for what their recorded configuration says."""
    return [
        " | ".join(f"seed{k}: {d}" for (n, k), d in sorted(differing.items()) if n == name)
        for name in names
    ]


def paired(by_seed: BySeed, *names: str) -> BySeed:
    return {k: runs for k, runs in by_seed.items() if all(n in runs for n in names)}


def over_seeds(
    by_seed: BySeed, curves: Callable[[dict[str, Run]], pd.DataFrame], keys: list[str], value: str
) -> pd.DataFrame:
    """curves(runs) of each seed, summarised over the seeds per `keys`."""
    frames = [curves(runs).assign(seed=k) for k, runs in by_seed.items() if runs]
    groups = pd.concat(frames or [pd.DataFrame(columns=[*keys, value])]).groupby(keys, sort=False)
    spread = groups[value].agg(["min", "max"]).add_prefix(f"{value}_")
    return summarise(groups, value).join(spread).reset_index()


def losses_at(by_seed: BySeed, names: list[str], step: int) -> pd.DataFrame:
    """Validation losses at `step`: experiment, seed, val_loss (NaN where missing)."""
    rows = [
        (n, k, runs[n].loss_at(step) if n in runs else np.nan)
        for n in names
        for k, runs in by_seed.items()
    ]
    return pd.DataFrame(rows, columns=["experiment", "seed", "val_loss"])


def table1_seeds(
    runs_dir: str | Path, preset: str | Preset, seeds: int, config_dir: str | Path | None = None
) -> pd.DataFrame:
    """Table 1 over the seeds: each experiment's loss and paired improvement, beside the paper's."""
    preset, experiments = load_config(preset, config_dir)
    members = table1_experiments(preset, experiments)
    names = [e.name for e in members]
    by_seed, differing = checked_runs(read_seed_runs(runs_dir, names, seeds), members, preset)
    losses = losses_at(by_seed, names, preset.report.table_step)
    step = preset.report.table_step
    losses["val_bpb"] = [
        val_bpb(by_seed[k].get(n), loss, step, preset)
        for n, k, loss in losses.itertuples(index=False)
    ]
    bpb = summarise(losses.groupby("experiment", sort=False), "val_bpb").drop(columns="n_seeds")
    by_seed = losses.pivot(index="seed", columns="experiment", values="val_loss")
    gains = pd.DataFrame(
        [paired_difference(by_seed, name, experiments.baseline) for name in names], index=names
    ).filter(regex="^(n_pairs|rel_improvement_|spread_|gap_in_spreads)")
    table = summarise(losses.groupby("experiment", sort=False), "val_loss").join(bpb).join(gains)
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
