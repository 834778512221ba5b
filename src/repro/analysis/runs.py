"""Run directories (repro.rundir), read; nothing here trains or plots."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis import status
from repro.files import read_regular
from repro.rundir import (
    METRICS_BYTES,
    METRICS_COLUMNS,
    METRICS_CSV,
    RunError,
    RunRecord,
    files_dir,
    has_run,
    read_record,
)


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
        evals = self.metrics.dropna(subset=["eval_val_loss"])
        return evals.set_index("step")[
            ["eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std"]
        ]

    def loss_at(self, step: int, split: str = "val") -> float:
        """The evaluation loss at `step` (NaN where there is none)."""
        evals = self.evals()
        return float(evals.at[step, f"eval_{split}_loss"]) if step in evals.index else math.nan


def read_run(run_dir: str | Path) -> Run:
    """Read a run directory (its live/ folder while it trains)."""
    run_dir = files_dir(run_dir)
    record = read_record(run_dir)
    if not (run_dir / METRICS_CSV).exists():
        raise RunError(f"{run_dir / METRICS_CSV}: no such file (has this run been trained?)")
    return Run(path=run_dir, metrics=read_metrics(run_dir / METRICS_CSV), record=record)


def read_metrics(path: Path) -> pd.DataFrame:
    """metrics.csv, checked; a last line without its newline is being written: left out."""
    try:
        text = read_regular(path, METRICS_BYTES, RunError, "a metrics file").decode("utf-8")
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if not text.startswith(",".join(METRICS_COLUMNS)):
        raise RunError(f"{path}: not a metrics file (no header {METRICS_COLUMNS[0]},...)")
    metrics = pd.read_csv(io.StringIO(text[: text.rfind("\n") + 1]), dtype=str)
    numbers = metrics.apply(pd.to_numeric, errors="coerce")
    # NaN is bad unless written "nan" (a diverged loss): only those few cells are looked at.
    suspect = zip(*(numbers.isna().to_numpy() & metrics.notna().to_numpy()).nonzero())
    bad = [(row, col) for row, col in suspect if metrics.iat[row, col].lower() != "nan"]
    if bad:
        row, col = bad[0]
        raise RunError(
            f"{path}, line {row + 2}: {metrics.columns[col]} {metrics.iat[row, col][:40]!r} "
            "is not a number"
        )
    wrong = (numbers["step"].to_numpy() != np.arange(len(numbers))).nonzero()[0]
    if len(wrong):
        raise RunError(
            f"{path}, line {wrong[0] + 2}: step {metrics['step'][wrong[0]]}, expected {wrong[0]} "
            f"(rows missing or moved)"
        )
    numbers["step"] = numbers["step"].astype(int)
    return numbers


def read_runs(runs_dir: str | Path, names: list[str]) -> dict[str, Run]:
    """The runs of `names` under runs_dir, those in progress too; missing ones left out."""
    return {
        name: read_run(Path(runs_dir) / name) for name in names if has_run(Path(runs_dir) / name)
    }


def read_run_list(runs_dir: str | Path, runs: str | Path | list) -> dict[str, Run]:
    """The runs a user lists: folders under runs_dir or any run folder's path, else an error."""
    listed = [runs] if isinstance(runs, (str, Path)) else list(runs)
    picked = {}
    for entry in listed:
        under = Path(runs_dir) / str(entry)
        if not (has_run(under) or has_run(entry)):
            names = sorted(p.name for p in Path(runs_dir).glob("*") if has_run(p))
            raise RunError(
                f"{entry}: no run of that name in {runs_dir} (its runs: "
                f"{', '.join(names) or 'none'}) and no run folder at that path"
            )
        picked[str(entry)] = read_run(under if has_run(under) else Path(entry))
    return picked


def evals_table(runs: dict[str, Run]) -> pd.DataFrame:
    return pd.concat({label: run.evals() for label, run in runs.items()}, names=["run"])


def list_runs(runs_dir: str | Path, names: list[str] | None = None) -> pd.DataFrame:
    return pd.DataFrame(status.summaries(runs_dir, names), columns=status.RUN_COLUMNS)
