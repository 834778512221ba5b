"""Is a run on course? Its validation losses against a reference run's (another of ours, or one
of the authors' imported: repro.annex.authors.runs), step by step.

The tolerance is the 95% prediction half-width of two single runs' difference over the
experiment's seeds, t(0.975, n - 1) x sd x sqrt(2), else DEFAULT_TOLERANCE (docs/annex/tuning.md).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.runs import Run, has_run, read_run
from repro.analysis.stated import stated_differences
from repro.errors import ReproError
from repro.rundir import LIVE, identity_differences

# 0.01 nats: a quarter of the paper's largest effect, 2.956 - 2.915 = 0.041 nats at step 59,000
# (docs/specification.md §3), so that a run inside it cannot by itself make or unmake that effect.
DEFAULT_TOLERANCE = 0.01
COMPARE_COLUMNS = ["step", "val_loss", "reference_val_loss", "difference", "tolerance", "verdict"]
OFF_COURSE = ("behind", "ahead")  # the verdicts of a step outside the tolerance
SEED_FOLDER = re.compile(r"seed[1-9][0-9]*")
# Not a difference of configuration: the seed (how much seeds differ is what the measured tolerance
# is about) and where training stops (only the common steps are compared).
SAME_CONFIGURATION = ("train.init_seed", "train.index_seed", "train.max_step")


def seed_runs(run_path: str | Path) -> list[Run]:
    """Every seed's run of a run's experiment at its preset: <runs>/seed*/<experiment>."""
    run_path = Path(run_path)
    base = (
        run_path.parent.parent if SEED_FOLDER.fullmatch(run_path.parent.name) else run_path.parent
    )
    folders = [base / run_path.name] + [
        p / run_path.name for p in sorted(base.iterdir()) if SEED_FOLDER.fullmatch(p.name)
    ]
    return [read_run(f) for f in folders if has_run(f)]


def measured_tolerance(runs: list[Run]) -> pd.Series:
    """Per evaluation step: the 95% half-width of two single runs' difference, from the spread."""
    # Here, not at the top: scipy.stats is most of `repro status`'s start, and only seeds need it.
    from scipy import stats

    from repro.analysis.seeds import CONFIDENCE

    losses = pd.concat([r.evals()["eval_val_loss"] for r in runs], axis=1)
    n = losses.notna().sum(axis=1)
    losses = losses[n >= 2]
    n = n[n >= 2]
    t = pd.Series(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1), index=n.index)
    return (t * losses.std(axis=1) * math.sqrt(2)).rename("tolerance")


def compare_curves(
    ours: pd.Series, reference: pd.Series, tolerance: float | pd.Series
) -> pd.DataFrame:
    """The comparison table of two validation-loss curves (indexed by step) at their common
    steps; a Series tolerance gives each step its own (steps it lacks get DEFAULT_TOLERANCE)."""
    both = pd.concat(
        [ours.rename("val_loss"), reference.rename("reference_val_loss")], axis=1, join="inner"
    ).dropna()
    both["difference"] = both["val_loss"] - both["reference_val_loss"]
    both = both[both["difference"].notna()]  # inf - inf: two diverged evaluations, no reading
    if isinstance(tolerance, pd.Series):
        both["tolerance"] = tolerance.reindex(both.index).fillna(DEFAULT_TOLERANCE)
    else:
        both["tolerance"] = tolerance
    both["verdict"] = np.select(
        [
            both.index == 0,
            both["difference"].abs() <= both["tolerance"],
            both["difference"] > 0,
        ],
        ["untrained", "within", "behind"],
        "ahead",
    )
    return both.rename_axis("step").reset_index()[COMPARE_COLUMNS]


def compare_runs(
    run: Run, reference: Run, tolerance: float | None = None
) -> tuple[pd.DataFrame, str]:
    """The comparison table of a run with a reference run, and where its tolerance comes from."""
    if tolerance is not None:
        source = f"given: {tolerance:g} nats"
    else:
        seeds = seed_runs(run.path.parent if run.path.name == LIVE else run.path)
        tolerance = measured_tolerance(seeds) if len(seeds) >= 2 else DEFAULT_TOLERANCE
        source = (
            f"measured: 95% interval of a difference from {len(seeds)} seeds of "
            f"{run.name} (default {DEFAULT_TOLERANCE:g} nats where they lack a step)"
            if isinstance(tolerance, pd.Series)
            else f"fixed: {DEFAULT_TOLERANCE:g} nats (fewer than two seeds of {run.name} to "
            f"measure it)"
        )
    ours, theirs = (r.evals()["eval_val_loss"] for r in (run, reference))
    return compare_curves(ours, theirs, tolerance), source


def configuration_differences(run: Run, reference: Run) -> list[str]:
    """What the runs' configurations differ in, "key: reference's -> run's" (SAME_CONFIGURATION
    aside); a reference that records none (the audit's logs) is held against what was stated."""
    if not reference.record.identity:
        return stated_differences(reference.record.data.get("stated", {}), run.record.identity)
    return [
        d
        for d in identity_differences(reference.record.identity, run.record.identity)
        if d.split(":")[0] not in SAME_CONFIGURATION
    ]


def trained(table: pd.DataFrame) -> bool:
    return bool((table["step"] > 0).any())


def reference_diverged(run: Run, reference: Run) -> str | None:
    """Where the reference diverged at a step the run has evaluated (its non-finite loss is no
    common step: the comparison table cannot show it), in words; None where it did not."""
    step = reference.record.diverged_step
    if step is None or run.evals().index.max() < step:
        return None
    return f"the reference diverged at step {step} ({reference.record.diverged_reason})"


def verdict(table: pd.DataFrame, differences: list[str] = (), diverged: str | None = None) -> str:
    """One line: on course, or the first step where it left the band or the reference diverged."""
    if not trained(table):
        raise ReproError(
            f"no verdict: no common evaluation step after step 0 (common: "
            f"{', '.join(map(str, table['step'])) or 'none'}); at step 0 both models are untrained"
        )
    table = table[table["step"] > 0]
    n = len(table)
    steps = (
        f"{n} common evaluation step{'s' * (n > 1)} after step 0, "
        f"{table['step'].min()}..{table['step'].max()}"
    )
    off = table[table["verdict"].isin(OFF_COURSE)]
    if diverged:
        line = f"off course: {diverged}, a step the run passed; {len(off)} of {steps} outside"
    elif off.empty:
        line = f"on course: within the tolerance at {'all ' * (n > 1)}{steps}"
    else:
        first = off.iloc[0]
        behind = first["verdict"] == "behind"
        line = (
            f"off course: {'behind' if behind else 'ahead of'} the reference from step "
            f"{first['step']}, its validation loss {abs(first['difference']):.4f} nats "
            f"{'higher' if behind else 'lower'} (tolerance {first['tolerance']:.4f}); "
            f"outside at {len(off)} of {steps}"
        )
    if differences:
        keys = ", ".join(d.split(":")[0] for d in differences)
        line = f"across configurations (they differ in {keys}): {line}"
    return line


def latest(table: pd.DataFrame) -> str:
    """The last common step as `repro status` shows it: the difference and its verdict."""
    if not trained(table):
        return "-"
    last = table.iloc[-1]
    return f"{last['difference']:+.4f} {last['verdict']} @{last['step']}"
