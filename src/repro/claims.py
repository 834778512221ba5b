"""The text's claims (docs/specification.md §4), checked against the runs that exist.

Which experiments play which role (the baseline, the larger linear control, the unstable baseline)
is data: `baseline` and `claims` in the experiments file.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from repro.config import Experiments, Preset, load_config
from repro.results import Run, read_runs, relative_improvement_curves

CLAIM_COLUMNS = ["claim", "experiment", "holds", "detail"]


def _early_limit(preset: Preset) -> int:
    """The last step that counts as 'early': the end of warm-up, or the first evaluation after
    step 0 if warm-up ends before it (the smoke preset evaluates every 20 steps, warms up 10)."""
    return max(preset.train.warmup_steps, preset.train.eval_interval)


def _nonlinear_claims(name: str, runs: dict[str, Run], experiments: Experiments,
                      preset: Preset) -> list[tuple]:
    """(claim, holds, detail) for one nonlinear experiment of Table 1."""
    base, control = experiments.baseline, experiments.claims["larger_control"]
    beats, beats_control, early = ("beats baseline at every evaluation", f"beats {control}",
                                   "largest relative gain early")
    if name not in runs or base not in runs:
        return [(claim, None, "run missing") for claim in (beats, beats_control, early)]
    table_step = preset.report.table_step
    curve = relative_improvement_curves({base: runs[base], name: runs[name]}, base,
                                        last_step=table_step)
    rows = []
    if curve.empty:
        rows.append((beats, None, "no common evaluation steps"))
    else:
        losing = curve.loc[curve["rel_improvement"] <= 0, "step"].tolist()
        steps = f"steps {curve['step'].min()}..{curve['step'].max()}"
        rows.append((beats, not losing, f"{len(curve)} evaluations, {steps}; "
                     + (f"not ahead at steps {losing}" if losing else "ahead at all")))
    if control in runs:
        ours, theirs = runs[name].loss_at(table_step), runs[control].loss_at(table_step)
        holds = None if math.isnan(ours) or math.isnan(theirs) else ours < theirs
        rows.append((beats_control, holds,
                     f"val loss at step {table_step}: {ours:.4f} vs {control} {theirs:.4f}"))
    else:
        rows.append((beats_control, None, f"{control} run missing"))
    if curve.empty:
        rows.append((early, None, "no common evaluation steps"))
    else:
        best, limit = curve.loc[curve["rel_improvement"].idxmax()], _early_limit(preset)
        rows.append((early, bool(best["step"] <= limit),
                     f"largest gain {best['rel_improvement']:.2%} at step {int(best['step'])} "
                     f"(early: step <= {limit})"))
    return rows


def check_claims(runs_dir: str | Path, preset: str | Preset, config_dir: str | Path | None = None,
                 divergence_step: int | None = None) -> pd.DataFrame:
    """One row per (claim, experiment): holds (True/False, or None when the runs needed are
    missing) and a detail line. The claims, for each residual_gelu experiment of Table 1:
      - it beats the baseline at every evaluation from the first after step 0 to the table step;
      - it beats the larger linear control at the table step;
      - its largest relative gain over the baseline comes early (by the end of warm-up).
    And, if it was trained: the unstable baseline diverges before `divergence_step`
    (20k on the paper preset; default: a third of the preset's max_step).
    """
    preset, experiments = load_config(preset, config_dir)
    nonlinear = [e.name for e in experiments.group("table1") if e.query_mode == "residual_gelu"]
    unstable = experiments.claims["unstable"]
    runs = read_runs(runs_dir, [experiments.baseline, experiments.claims["larger_control"],
                                unstable, *nonlinear])
    rows = [(claim, name, holds, detail) for name in nonlinear
            for claim, holds, detail in _nonlinear_claims(name, runs, experiments, preset)]

    limit = divergence_step if divergence_step is not None else preset.train.max_step // 3
    claim = "baseline diverges at weight decay 0.05"
    if unstable in runs:
        run = runs[unstable]
        step = run.record.diverged_step
        holds = run.status == "diverged" and step is not None and step < limit
        at = f", diverged at step {step}" if step is not None else ""
        rows.append((claim, unstable, holds,
                     f"status {run.status}{at} (claim: before step {limit})"))
    else:
        rows.append((claim, unstable, None, "not trained (group `claims`)"))
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)
