"""When a run has diverged (docs/runs.md, "When a run diverges"): the stop repro.training.run
consults at
every interval's metrics rows, and at a resume replays over the rows the run keeps."""

from __future__ import annotations

import math
from dataclasses import dataclass

from repro.config import RunConfig


@dataclass
class DivergenceStop:
    """At any step: a non-finite train loss, or one above the loss ceiling (RunConfig.loss_ceiling).
    At an evaluation: a non-finite evaluation loss, or the `evaluations`-th consecutive validation
    loss more than `margin` nats above the best one before it (margin None: never).
    """

    ceiling: float
    margin: float | None
    evaluations: int
    best: float = math.inf  # the lowest validation loss so far
    above: int = 0  # consecutive evaluations more than `margin` above `best`

    @classmethod
    def of(cls, run: RunConfig, kept_rows: list[dict]) -> "DivergenceStop":
        """The stop of `run`, having seen the rows a resumed run keeps (rows_before's)."""
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
        """Why the run diverged at this metrics row, or None."""
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
