"""What a training run does at intervals, each owning when it is due: the metrics rows of the steps
since the last write (their losses wait on the device until then) and the checkpoint."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from repro.rundir import MetricsLog
from repro.runtime.progress import Progress
from repro.training.checkpoints import save_checkpoint


@dataclass
class StepLog:
    """metrics.csv's rows and train.log's progress lines, written once an interval: the steps'
    losses stay device tensors until then, so that the host waits for the device once."""

    metrics: MetricsLog
    progress: Progress | None  # the main process's; None on the other ranks
    tokens_per_step: int
    log_interval: int
    eval_interval: int
    start: int  # the first step this process trains
    pending: list = field(default_factory=list)  # (step, lr, evaluation; device loss) a step
    began: float = 0.0  # when the pending steps began

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
        """Start an interval's clock at its first step (after any evaluation)."""
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

    def write(self, rows: list[dict], diverged: tuple[int, str] | None) -> None:
        """The rows up to a diverged step (its row the last), and train.log's line: the interval's
        progress, or the divergence."""
        for row in rows:
            self.metrics.append(row)
            if diverged is not None and row["step"] == diverged[0]:
                break
        if self.progress is None:
            return
        if diverged is not None:
            step, reason = diverged
            self.progress.say(f"step {step}: {reason} — diverged; ending the run")
        else:
            self.progress.report(rows)


@dataclass
class Checkpoints:
    """The run's checkpoint, saved by the main process every `interval` steps and at the last."""

    path: Path
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    config: dict  # what a resume checks: the run's identity and its model
    interval: int
    max_step: int
    writer: bool  # the main process: the one that writes the run's files

    def due(self, step: int) -> bool:
        """Whether to checkpoint after `step`."""
        return (step + 1) % self.interval == 0 or step == self.max_step

    def save(self, next_step: int) -> None:
        """The model and optimiser as they are before step `next_step`."""
        if self.writer:
            save_checkpoint(self.path, self.model, self.optimizer, next_step, self.config)
