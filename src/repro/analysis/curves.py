"""Loss curves of runs, and their relative improvement over the baseline, as long tables: what
Table 1, the claims and the figures are computed from."""

from __future__ import annotations

import pandas as pd

from repro.analysis.runs import Run


def relative_improvement(loss: float | pd.Series, baseline: float | pd.Series):
    """(L_baseline - L) / L_baseline (§3)."""
    return (baseline - loss) / baseline


def relative_improvement_curves(
    runs: dict[str, Run],
    baseline: str,
    split: str = "val",
    first_step: int = 1,
    last_step: int | None = None,
) -> pd.DataFrame:
    """Relative improvement at each evaluation step both runs have in [first_step, last_step]."""
    base = runs[baseline].evals()[f"eval_{split}_loss"].rename("baseline_loss")
    frames = []
    for name, run in runs.items():
        if name == baseline:
            continue
        both = pd.concat(
            [run.evals()[f"eval_{split}_loss"].rename("loss"), base], axis=1, join="inner"
        ).reset_index()
        both.insert(0, "experiment", name)
        frames.append(both)
    columns = ["experiment", "step", "loss", "baseline_loss", "rel_improvement"]
    if not frames:
        return pd.DataFrame(columns=columns)
    curves = pd.concat(frames, ignore_index=True)
    curves["rel_improvement"] = relative_improvement(curves["loss"], curves["baseline_loss"])
    keep = curves["step"] >= first_step
    if last_step is not None:
        keep &= curves["step"] <= last_step
    return curves.loc[keep, columns].reset_index(drop=True)


def loss_curves(
    runs: dict[str, Run], first_step: int = 1, last_step: int | None = None
) -> pd.DataFrame:
    """Evaluation losses of every run: experiment, step, split (train|val), loss."""
    frames = []
    for name, run in runs.items():
        evals = run.evals().reset_index()
        for split in ("train", "val"):
            frames.append(
                pd.DataFrame(
                    {
                        "experiment": name,
                        "step": evals["step"],
                        "split": split,
                        "loss": evals[f"eval_{split}_loss"],
                    }
                )
            )
    curves = pd.concat(frames, ignore_index=True)
    keep = curves["step"] >= first_step
    if last_step is not None:
        keep &= curves["step"] <= last_step
    return curves[keep].reset_index(drop=True)
