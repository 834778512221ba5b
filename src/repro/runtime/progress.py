"""A run's progress as it trains: one line per log interval, printed and appended to train.log.

The line says where the run is (step / max step), how it learns (the interval's mean training
loss, the losses of any evaluation in it), how fast it goes (tokens/s) and when it will end (ETA,
from the pace since this process started). train.log sits in the run's directory next to the
checkpoint, so a resumed run appends to the log its earlier processes wrote.

train.log is a copy of what is printed: a train.log that is a symbolic link is refused (appending
through it would write into its target), and a line that cannot be appended (a full disk) is
printed all the same, with a warning, while training goes on: metrics.csv and the checkpoints are
the run's record, and their writers have their own full-disk checks.
"""

from __future__ import annotations

import math
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from repro.files import open_no_link

PROGRESS_LOG = "train.log"


def duration(seconds: float) -> str:
    """1d 02:03:04, or 2:03:04 under a day."""
    if not math.isfinite(seconds):
        return "?"
    days, rest = divmod(round(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}d {hours:02d}:{rest // 60:02d}:{rest % 60:02d}" if days else text


def progress_line(rows: list[dict], max_step: int, elapsed: float, steps_done: int) -> str:
    """The line for metrics rows just written (one per step, in order)."""
    step = rows[-1]["step"]
    loss = sum(r["train_loss"] for r in rows) / len(rows)
    eta = elapsed / steps_done * (max_step - step) if steps_done else math.inf
    parts = [
        f"step {step}/{max_step}",
        f"train loss {loss:.4f}",
        f"{rows[-1]['tokens_per_s']:,.0f} tokens/s",
        f"elapsed {duration(elapsed)}",
        f"ETA {duration(eta)}",
    ]
    parts += [
        f"eval at step {r['step']}: train {r['eval_train_loss']:.4f}, val {r['eval_val_loss']:.4f}"
        for r in rows
        if r.get("eval_val_loss") is not None
    ]
    return " | ".join(parts)


class Progress:
    """The progress of one training session of a run, from step `start` to `max_step`."""

    def __init__(self, run_dir: Path, start: int, max_step: int):
        self.path = Path(run_dir) / PROGRESS_LOG
        self.start, self.max_step = start, max_step
        self.began = time.perf_counter()
        self.warned = False
        self.say(f"{'resuming' if start else 'starting'} at step {start}/{max_step}")

    def say(self, text: str) -> None:
        print(text, flush=True)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        try:
            fd = open_no_link(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "a run's log")
            with open(fd, "a") as f:
                f.write(f"{stamp} {text}\n")
        except OSError as e:
            if not self.warned:
                print(
                    f"warning: {self.path}: cannot append ({e.strerror}); training goes on, "
                    f"its progress printed only",
                    file=sys.stderr,
                    flush=True,
                )
            self.warned = True

    def report(self, rows: list[dict]) -> None:
        steps_done = rows[-1]["step"] + 1 - self.start
        self.say(progress_line(rows, self.max_step, time.perf_counter() - self.began, steps_done))
