"""Runs -> tables and curves: Table 1 and the relative improvement over the baseline.

A run directory (results/runs/<preset>/<experiment>/, repro.rundir) holds metrics.csv, one row per
optimiser step whose eval_* columns are filled at evaluation steps only, and run.json, what was run
and how it ended. Everything here reads those two files; nothing trains or plots.

Relative improvement (docs/specification.md §3): (L_baseline - L) / L_baseline, positive when L
beats the baseline.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from repro.config import Experiment, Preset, load_config
from repro.rundir import METRICS_CSV, RUN_JSON, RunError, RunRecord, read_record

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
    record: RunRecord

    @property
    def name(self) -> str:
        return self.record.experiment

    @property
    def status(self) -> str:
        return self.record.status

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
    record = read_record(run_dir)
    if not (run_dir / METRICS_CSV).exists():
        raise RunError(f"{run_dir / METRICS_CSV}: no such file (has this run been trained?)")
    return Run(path=run_dir, metrics=pd.read_csv(run_dir / METRICS_CSV), record=record)


def read_runs(runs_dir: str | Path, names: list[str]) -> dict[str, Run]:
    """The runs of `names` under runs_dir (results/runs/<preset>/); missing ones are left out."""
    runs_dir = Path(runs_dir)
    return {name: read_run(runs_dir / name) for name in names
            if (runs_dir / name / METRICS_CSV).exists() and (runs_dir / name / RUN_JSON).exists()}


def list_runs(runs_dir: str | Path) -> pd.DataFrame:
    """Every run under runs_dir (results/runs/<preset>/): experiment, status, last step, and its
    last evaluation (step and validation loss)."""
    rows = []
    for path in sorted(Path(runs_dir).glob(f"*/{RUN_JSON}")):
        run = read_run(path.parent)
        evals = run.evals()
        rows.append({"experiment": path.parent.name, "status": run.status,
                     "last_step": run.record.last_step,
                     "last_eval_step": evals.index.max() if len(evals) else None,
                     "last_eval_val_loss": evals["eval_val_loss"].iloc[-1] if len(evals) else None})
    return pd.DataFrame(rows, columns=["experiment", "status", "last_step", "last_eval_step",
                                       "last_eval_val_loss"])


def relative_improvement(loss: float | pd.Series, baseline: float | pd.Series):
    """(L_baseline - L) / L_baseline (§3)."""
    return (baseline - loss) / baseline


def relative_improvement_curves(runs: dict[str, Run], baseline: str, split: str = "val",
                                first_step: int = 1,
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
    step = preset.report.table_step
    loss = run.loss_at(step) if run is not None else math.nan
    params = run.record.params if run is not None else {}
    paper = experiment.paper
    return {
        "experiment": experiment.name,
        "query_mode": experiment.query_mode,
        "mlp_ratio": experiment.mlp_ratio,
        **asdict(experiment.optimizer),
        "non_embedding_params": params.get("non_embedding_params"),
        "step": step,
        "val_loss": loss,
        "rel_improvement": relative_improvement(loss, baseline_loss),
        "paper_val_loss": paper.val_loss if paper else None,
        "paper_rel_improvement": paper.rel_improvement if paper else None,
        "status": run.status if run is not None else "missing",
        "preset": preset.name,
    }


def table1(runs_dir: str | Path, preset: str | Preset, group: str = "table1",
           config_dir: str | Path | None = None,
           authors_runs_dir: str | Path | None = None) -> pd.DataFrame:
    """Table 1 (§3) from the runs under runs_dir: one row per experiment of the group.

    The loss is the validation evaluation at the preset's report.table_step (59,000 on the paper
    preset, the last evaluation on smoke); NaN where the run has no evaluation there
    (missing, or diverged before it). With authors_runs_dir (runs imported from the authors'
    artefacts, repro.authors), their loss and relative improvement stand in authors_* columns.
    """
    if authors_runs_dir is not None:
        table = table1(runs_dir, preset, group, config_dir)
        theirs = table1(authors_runs_dir, preset, group, config_dir)
        for column in ("val_loss", "rel_improvement", "status"):
            table[f"authors_{column}"] = theirs[column]
        return table
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group(group)
    runs = read_runs(runs_dir, [e.name for e in members])
    base = runs.get(experiments.baseline)
    baseline_loss = base.loss_at(preset.report.table_step) if base is not None else math.nan
    rows = [table1_row(e, runs.get(e.name), preset, baseline_loss) for e in members]
    table = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    table["non_embedding_params"] = table["non_embedding_params"].astype("Int64")
    return table
