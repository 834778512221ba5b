"""Run directories (repro.rundir), read; nothing here trains or plots."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from repro.rundir import (
    METRICS_COLUMNS,
    METRICS_CSV,
    RunError,
    RunRecord,
    checked_rows,
    files_dir,
    has_run,
    metrics_text,
    read_record,
)

EVAL_COLUMNS = ["eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std"]


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
        """The evaluation rows, indexed by step. Built from numpy arrays: dropna and set_index
        take four times as long, paid for each run an analysis reads (groups read hundreds)."""
        m = self.metrics
        evaluated = m["eval_val_loss"].notna().to_numpy()
        return pd.DataFrame(
            {c: m[c].to_numpy()[evaluated] for c in EVAL_COLUMNS},
            index=pd.Index(m["step"].to_numpy()[evaluated], name="step"),
        )

    def loss_at(self, step: int, split: str = "val") -> float:
        """The evaluation loss at `step` (NaN where there is none, or where it is infinite: a
        diverged evaluation is no reading)."""
        evals = self.evals()
        loss = float(evals.at[step, f"eval_{split}_loss"]) if step in evals.index else math.nan
        return loss if math.isfinite(loss) else math.nan


def read_run(run_dir: str | Path) -> Run:
    """Read a run directory (its live/ folder while it trains)."""
    run_dir = files_dir(run_dir)
    record = read_record(run_dir)
    return Run(path=run_dir, metrics=read_metrics(run_dir / METRICS_CSV), record=record)


def read_metrics(path: Path) -> pd.DataFrame:
    """metrics.csv, refused where and as repro.rundir.read_rows refuses it (checked_rows is the one
    judge); pandas parses a file of plainly written rows fast, the judge reads any other."""
    text = metrics_text(path)
    numbers = _plain_rows(text)
    if numbers is None:
        numbers = pd.DataFrame(checked_rows(path, text), columns=METRICS_COLUMNS, dtype=float)
    numbers["step"] = numbers["step"].astype(int)
    return numbers


# Where each line holds ten fields of these characters, pandas' float parser takes a value only
# if Python's float() takes it, as the same number (it refuses some that float() takes, such as
# "NaN" or "1_0": those files are read by the judge). Other characters could pass pandas alone:
# "True" reads as 1.0, a NUL ends a value. A lone "\r" ends a line for pandas: the count of rows
# tells.
_ODD_CHARACTER = re.compile(r"[^0-9.,+\-eEnaNifIF\r\n]")
_ODD_STEP = re.compile(r"\n(?!\Z)(?![1-9][0-9]*,)")  # a later line's step not written 1, 2, ...


def _plain_rows(text: str) -> pd.DataFrame | None:
    """The rows of metrics_text's `text`, parsed by pandas where every line is plainly written
    and its step is its line's; None where the judge must read them."""
    lines = text.count("\n")
    # Nine commas in the first line and in all: pandas refuses a later line with more fields.
    if text.count(",") != 9 * lines or text[: text.find("\n")].count(",") != 9:
        return None
    if not text.startswith("0,") or _ODD_STEP.search(text) or _ODD_CHARACTER.search(text):
        return None
    try:
        numbers = pd.read_csv(
            io.StringIO(text),
            header=None,
            names=METRICS_COLUMNS,
            index_col=False,
            dtype=np.float64,
            quoting=csv.QUOTE_NONE,
            skip_blank_lines=False,
            keep_default_na=False,
            na_values=["", "nan"],
        )
    except ValueError:
        return None
    if len(numbers) != lines or (numbers["step"].to_numpy() != np.arange(lines)).any():
        return None
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
