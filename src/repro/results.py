"""Runs -> tables and curves: Table 1, relative improvement over the baseline, the text's claims.

A run directory (results/runs/<preset>/<experiment>/, written by `repro train`) holds metrics.csv,
one row per optimiser step whose eval_* columns are filled at evaluation steps only, and run.json,
what was run and how it ended (status: running, completed or diverged). Everything here reads those
two files; nothing trains or plots.

Relative improvement (SPEC 3): (L_baseline - L) / L_baseline, positive when L beats the baseline.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from repro.config import Experiment, Experiments, Preset, load_experiments, load_preset

BASELINE = "baseline"

TABLE1_COLUMNS = [
    "experiment", "query_mode", "mlp_ratio", "lr_max", "lr_min", "weight_decay",
    "non_embedding_params", "step", "val_loss", "rel_improvement",
    "paper_val_loss", "paper_rel_improvement", "status", "preset",
]


@dataclass(frozen=True)
class Run:
    """One run directory, read: its metrics (one row per step) and its run.json."""
    path: Path
    metrics: pd.DataFrame
    info: dict

    @property
    def name(self) -> str:
        return self.info.get("experiment", self.path.name)

    @property
    def status(self) -> str:
        return self.info.get("status", "unknown")

    def evals(self) -> pd.DataFrame:
        """The evaluation rows only (step, eval_train_loss, eval_val_loss, ...), indexed by step."""
        evals = self.metrics.dropna(subset=["eval_val_loss"])
        return evals.set_index("step")[
            ["eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std"]]

    def loss_at(self, step: int, split: str = "val") -> float:
        """The evaluation loss at `step` (NaN if the run has no evaluation there)."""
        evals = self.evals()
        return float(evals.at[step, f"eval_{split}_loss"]) if step in evals.index else math.nan


def read_run(run_dir: str | Path) -> Run:
    """Read metrics.csv and run.json of a run directory."""
    run_dir = Path(run_dir)
    for name in ("metrics.csv", "run.json"):
        if not (run_dir / name).exists():
            raise FileNotFoundError(f"{run_dir / name}: no such file (has this run been trained?)")
    metrics = pd.read_csv(run_dir / "metrics.csv")
    info = json.loads((run_dir / "run.json").read_text())
    return Run(path=run_dir, metrics=metrics, info=info)


def read_runs(runs_dir: str | Path, names: list[str]) -> dict[str, Run]:
    """The runs of `names` under runs_dir (results/runs/<preset>/); missing ones are left out."""
    runs_dir = Path(runs_dir)
    return {name: read_run(runs_dir / name) for name in names
            if (runs_dir / name / "metrics.csv").exists() and (runs_dir / name / "run.json").exists()}


def list_runs(runs_dir: str | Path) -> pd.DataFrame:
    """Every run under runs_dir (results/runs/<preset>/): experiment, status, last step, and its
    last evaluation (step and validation loss)."""
    rows = []
    for path in sorted(Path(runs_dir).glob("*/run.json")):
        run = read_run(path.parent)
        evals = run.evals()
        rows.append({"experiment": path.parent.name, "status": run.status,
                     "last_step": run.info.get("last_step"),
                     "last_eval_step": evals.index.max() if len(evals) else None,
                     "last_eval_val_loss": evals["eval_val_loss"].iloc[-1] if len(evals) else None})
    return pd.DataFrame(rows, columns=["experiment", "status", "last_step", "last_eval_step",
                                       "last_eval_val_loss"])


def relative_improvement(loss: float | pd.Series, baseline: float | pd.Series):
    """(L_baseline - L) / L_baseline (SPEC 3)."""
    return (baseline - loss) / baseline


def relative_improvement_curves(runs: dict[str, Run], split: str = "val",
                                baseline: str = BASELINE, first_step: int = 1,
                                last_step: int | None = None) -> pd.DataFrame:
    """Relative improvement over the baseline at each evaluation step both runs have.

    A long table: experiment, step, loss, baseline_loss, rel_improvement; steps in
    [first_step, last_step] (the paper plots 1k..59k: step 0 is the untrained model).
    """
    base = runs[baseline].evals()[f"eval_{split}_loss"].rename("baseline_loss")
    frames = []
    for name, run in runs.items():
        if name == baseline:
            continue
        both = pd.concat([run.evals()[f"eval_{split}_loss"].rename("loss"), base],
                         axis=1, join="inner").reset_index()
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


def loss_curves(runs: dict[str, Run], first_step: int = 1,
                last_step: int | None = None) -> pd.DataFrame:
    """Evaluation losses of every run: experiment, step, split (train|val), loss."""
    frames = []
    for name, run in runs.items():
        evals = run.evals().reset_index()
        for split in ("train", "val"):
            frames.append(pd.DataFrame({"experiment": name, "step": evals["step"], "split": split,
                                        "loss": evals[f"eval_{split}_loss"]}))
    curves = pd.concat(frames, ignore_index=True)
    keep = curves["step"] >= first_step
    if last_step is not None:
        keep &= curves["step"] <= last_step
    return curves[keep].reset_index(drop=True)


def table1_row(experiment: Experiment, run: Run | None, preset: Preset,
               baseline_loss: float) -> dict:
    """One row of Table 1: the configuration, our loss at the table step, the paper's numbers."""
    step = preset.train.table_step
    loss = run.loss_at(step) if run is not None else math.nan
    params = (run.info.get("params") or {}) if run is not None else {}
    return {
        "experiment": experiment.name,
        "query_mode": experiment.query_mode,
        "mlp_ratio": experiment.mlp_ratio,
        "lr_max": experiment.lr_max,
        "lr_min": experiment.lr_min,
        "weight_decay": experiment.weight_decay,
        "non_embedding_params": params.get("non_embedding_params"),
        "step": step,
        "val_loss": loss,
        "rel_improvement": relative_improvement(loss, baseline_loss),
        "paper_val_loss": experiment.paper_val_loss,
        "paper_rel_improvement": experiment.paper_rel_improvement,
        "status": run.status if run is not None else "missing",
        "preset": preset.name,
    }


def load_config(preset: str | Preset, config_dir: str | Path | None = None
                ) -> tuple[Preset, Experiments]:
    """The preset (a name, a YAML path or a Preset) and the experiments, from config_dir
    (default: repro.config.default_config_dir(), the checkout's config/)."""
    config_dir = Path(config_dir) if config_dir else None
    if not isinstance(preset, Preset):
        preset = load_preset(preset, config_dir)
    return preset, load_experiments(config_dir / "experiments.yaml" if config_dir else None)


def table1(runs_dir: str | Path, preset: str | Preset, group: str = "table1",
           config_dir: str | Path | None = None) -> pd.DataFrame:
    """Table 1 (SPEC 3) from the runs under runs_dir: one row per experiment of the group.

    The loss is the validation evaluation at the preset's train.table_step (59,000 on the paper
    preset, the last evaluation on smoke); NaN where the run has no evaluation there
    (missing, or diverged before it).
    """
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group(group)
    runs = read_runs(runs_dir, [e.name for e in members])
    base = runs.get(BASELINE)
    baseline_loss = base.loss_at(preset.train.table_step) if base is not None else math.nan
    rows = [table1_row(e, runs.get(e.name), preset, baseline_loss) for e in members]
    table = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    table["non_embedding_params"] = table["non_embedding_params"].astype("Int64")
    return table


def _early_limit(preset: Preset) -> int:
    """The last step that counts as 'early': the end of warm-up, or the first evaluation after
    step 0 if warm-up ends before it (the smoke preset evaluates every 25 steps, warms up 20)."""
    return max(preset.train.warmup_steps, preset.train.eval_interval)


def check_claims(runs_dir: str | Path, preset: str | Preset,
                 config_dir: str | Path | None = None,
                 divergence_step: int | None = None) -> pd.DataFrame:
    """Check the text's claims (SPEC 4) against the runs that exist.

    One row per (claim, experiment): holds (True/False, or None when the runs needed are
    missing) and a detail line. The claims, for each residual_gelu experiment of Table 1:
      - it beats the baseline at every evaluation from the first after step 0 to the table step;
      - it beats mlp4.75 at the table step;
      - its largest relative gain over the baseline comes early (by the end of warm-up).
    And, if the claims group was trained: baseline-wd0.05 diverges before `divergence_step`
    (20k on the paper preset; default: a third of the preset's max_step).
    """
    preset, experiments = load_config(preset, config_dir)
    table_step = preset.train.table_step
    nonlinear = [e.name for e in experiments.group("table1") if e.query_mode == "residual_gelu"]
    runs = read_runs(runs_dir, [BASELINE, "mlp4.75", "baseline-wd0.05", *nonlinear])
    rows = []

    def add(claim, name, holds, detail):
        rows.append({"claim": claim, "experiment": name, "holds": holds, "detail": detail})

    for name in nonlinear:
        if name not in runs or BASELINE not in runs:
            add("beats baseline at every evaluation", name, None, "run missing")
            add("beats mlp4.75", name, None, "run missing")
            add("largest relative gain early", name, None, "run missing")
            continue
        curve = relative_improvement_curves({BASELINE: runs[BASELINE], name: runs[name]},
                                            last_step=table_step)
        if curve.empty:
            add("beats baseline at every evaluation", name, None, "no common evaluation steps")
        else:
            losing = curve.loc[curve["rel_improvement"] <= 0, "step"].tolist()
            add("beats baseline at every evaluation", name, not losing,
                f"{len(curve)} evaluations, steps {curve['step'].min()}..{curve['step'].max()}; "
                + (f"not ahead at steps {losing}" if losing else "ahead at all"))
        if "mlp4.75" in runs:
            ours, theirs = runs[name].loss_at(table_step), runs["mlp4.75"].loss_at(table_step)
            holds = None if math.isnan(ours) or math.isnan(theirs) else ours < theirs
            add("beats mlp4.75", name, holds,
                f"val loss at step {table_step}: {ours:.4f} vs mlp4.75 {theirs:.4f}")
        else:
            add("beats mlp4.75", name, None, "mlp4.75 run missing")
        if curve.empty:
            add("largest relative gain early", name, None, "no common evaluation steps")
        else:
            best = curve.loc[curve["rel_improvement"].idxmax()]
            limit = _early_limit(preset)
            add("largest relative gain early", name, bool(best["step"] <= limit),
                f"largest gain {best['rel_improvement']:.2%} at step {int(best['step'])} "
                f"(early: step <= {limit})")

    limit = divergence_step if divergence_step is not None else preset.train.max_step // 3
    if "baseline-wd0.05" in runs:
        run = runs["baseline-wd0.05"]
        step = run.info.get("diverged_step")
        holds = run.status == "diverged" and step is not None and step < limit
        add("baseline diverges at weight decay 0.05", "baseline-wd0.05", holds,
            f"status {run.status}" + (f", diverged at step {step}" if step is not None else "")
            + f" (claim: before step {limit})")
    else:
        add("baseline diverges at weight decay 0.05", "baseline-wd0.05", None,
            "not trained (group `claims`)")
    return pd.DataFrame(rows, columns=["claim", "experiment", "holds", "detail"])
