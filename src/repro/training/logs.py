"""A run's logs: metrics.csv's rows and train.log's lines, written once an interval (the steps'
losses wait on the device until then), and the divergence judge that reads each row on its way
(docs/runs.md, "When a run diverges"), having replayed at a resume the rows the run keeps."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from repro.config import RunConfig
from repro.rundir import METRICS_CSV, MetricsLog, Progress


@dataclass
class DivergenceStop:
    """A non-finite loss or a train loss above the ceiling, or the `evaluations`-th consecutive
    validation loss more than `margin` nats above the best before it (docs/runs.md)."""

    ceiling: float
    margin: float | None
    evaluations: int
    best: float = math.inf  # the lowest validation loss so far
    above: int = 0  # consecutive evaluations more than `margin` above `best`

    @classmethod
    def of(cls, run: RunConfig, kept_rows: list[dict]) -> "DivergenceStop":
        """The stop of `run`, having seen the rows a resumed run keeps."""
        stop = cls(run.loss_ceiling, run.train.divergence_margin, run.train.divergence_evaluations)
        for row in kept_rows:
            if row["eval_val_loss"] != "":
                stop.evaluated(float(row["eval_val_loss"]))
        return stop

    def first(self, rows: list[dict]) -> tuple[int, str] | None:
        """The first of these consecutive metrics rows at which the run diverged: (step, why)."""
        for row in rows:
            if (reason := self.reason(row)) is not None:
                return row["step"], reason
        return None

    def reason(self, row: dict) -> str | None:
        loss = row["train_loss"]
        if loss > self.ceiling:
            return f"train loss {loss:.4f}, above the ceiling {self.ceiling:.4f}"
        for key in ("train_loss", "eval_train_loss", "eval_val_loss"):
            if key in row and not math.isfinite(row[key]):
                return f"{key} {row[key]}, not a finite number"
        return self.evaluated(row["eval_val_loss"]) if "eval_val_loss" in row else None

    def evaluated(self, val_loss: float) -> str | None:
        """Take one evaluation's validation loss; why it ends the run, or None."""
        if self.margin is not None and val_loss > self.best + self.margin:
            self.above += 1
            if self.above >= self.evaluations:
                return (
                    f"validation loss {val_loss:.4f}, more than {self.margin:g} above the best "
                    f"{self.best:.4f} at {self.above} consecutive evaluations"
                )
            return None
        self.above = 0
        self.best = min(self.best, val_loss)
        return None


@dataclass
class StepLog:
    """metrics.csv's rows and train.log's progress lines, written once an interval: the steps'
    losses stay device tensors until then, so that the host waits for the device once."""

    metrics: MetricsLog
    progress: Progress | None  # the main process's; None on the other ranks
    divergence: DivergenceStop
    tokens_per_step: int
    log_interval: int
    eval_interval: int
    start: int  # the first step this process trains
    pending: list = field(default_factory=list)  # (step, lr, evaluation; device loss) a step
    began: float = 0.0  # when the pending steps began

    @classmethod
    def open(cls, run: RunConfig, out_dir: Path, kept: list[dict], writer: bool) -> "StepLog":
        """The logs of `run` in out_dir after the `kept` rows; only the `writer` writes files, but
        every rank replays the kept rows, so all decide alike."""
        start = len(kept)
        return cls(
            MetricsLog(out_dir / METRICS_CSV if writer else None, kept, run),
            Progress(out_dir, start, run.train.max_step) if writer else None,
            DivergenceStop.of(run, kept),
            run.tokens_per_step,
            run.runtime.log_interval,
            run.train.eval_interval,
            start,
        )

    def due(self, step: int) -> bool:
        """Whether to write after `step`: at the log interval, before an evaluation (so that its
        time stays out of the step times), and after this process's first step (so that
        compilation and warm-up are its row's time alone)."""
        return (
            (step + 1) % self.log_interval == 0
            or (step + 1) % self.eval_interval == 0
            or step == self.start
        )

    def start_clock(self) -> None:
        if not self.pending:
            self.began = time.perf_counter()

    def add(self, step: int, lr: float, evaluation: dict, loss: torch.Tensor) -> None:
        """A step taken: its learning rate, its evaluation (if any) and its loss, on the device."""
        self.pending.append(({"step": step, "lr": lr} | evaluation, loss))

    def take(self) -> list[dict]:
        """The metrics rows of the pending steps, waiting for the device once. Step times are the
        interval's wall time shared equally: the device runs the steps back to back."""
        losses = torch.stack([loss for _, loss in self.pending]).tolist()  # the one wait
        step_time = (time.perf_counter() - self.began) / len(self.pending)
        per_step = self.tokens_per_step
        rows = [
            values
            | {
                "train_loss": loss,
                "tokens_seen": (values["step"] + 1) * per_step,
                "step_time_s": step_time,
                "tokens_per_s": per_step / step_time,
            }
            for (values, _), loss in zip(self.pending, losses)
        ]
        self.pending = []
        return rows

    def write(self) -> tuple[int, str] | None:
        """Write the rows up to the first that diverged; return that step and why, else None."""
        rows = self.take()
        diverged = self.divergence.first(rows)
        for row in rows:
            self.metrics.append(row)
            if diverged is not None and row["step"] == diverged[0]:
                break
        if self.progress is not None and diverged is not None:
            self.progress.say(f"step {diverged[0]}: {diverged[1]} — diverged; ending the run")
        elif self.progress is not None:
            self.progress.report(rows)
        return diverged
