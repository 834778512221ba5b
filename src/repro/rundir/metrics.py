"""metrics.csv (one row an optimiser step, also as TensorBoard events and to the trackers), the
check that a resume keeps exactly the rows before it, and train.log. Training writes and the
results read through here, so the columns are defined once. train.log is only a copy of what is
printed: a line that cannot be appended is a warning, not a stop.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from repro.files import WriteError, atomic_write, open_no_link, open_regular, read_regular
from repro.rundir.record import CHECKPOINT, METRICS_CSV, RunError

METRICS_BYTES = 1 << 30  # metrics.csv takes about 150 bytes a step: a million steps, with room

METRICS_COLUMNS = [
    "step",
    "lr",
    "train_loss",
    "eval_train_loss",
    "eval_train_std",
    "eval_val_loss",
    "eval_val_std",
    "tokens_seen",
    "step_time_s",
    "tokens_per_s",
]


class MetricsLog:
    """metrics.csv, its TensorBoard events and the trackers of `run` (runtime.trackers, none
    without a run); with path None (a DDP rank > 0) rows are dropped."""

    def __init__(self, path: Path | None, kept: list[dict], run=None):
        self.path, self.file, self.failed, self.trackers = path, None, False, None
        if path is None:
            return
        # Imported here: only a run's writers, not every reader of results, pay its import.
        from repro.rundir.tensorboard import EventLog

        self.events = EventLog(path.parent, len(kept))
        # Rewrite the kept rows atomically: a crash here loses no finished row.
        write_metrics(path, kept)
        fd = open_no_link(path, os.O_WRONLY | os.O_APPEND, "a run's metrics")
        self.file = open(fd, "a", newline="")
        self.writer = csv.DictWriter(self.file, METRICS_COLUMNS)
        if run is not None and run.runtime.trackers:  # and only a run with trackers, theirs
            from repro.rundir.trackers import Trackers

            self.trackers = Trackers(path.parent, run)

    def append(self, row: dict) -> None:
        if self.file is None:
            return
        try:
            self.writer.writerow(_csv_row(row))
            self.file.flush()
        except OSError as e:  # a full disk: the rows before this one are whole
            self.failed = True
            raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None
        self.events.append(row)
        if self.trackers is not None:
            self.trackers.append(row)

    @property
    def trackers_on(self) -> list[str]:
        """The trackers still fed (run.json's `trackers`)."""
        return [] if self.trackers is None else self.trackers.on

    def close(self) -> None:
        if self.file is None:
            return
        try:
            self.file.close()
        except OSError as e:  # the row left in the buffer: after a failed append, said already
            if not self.failed:
                raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None
        finally:
            try:
                self.events.close()
            finally:
                if self.trackers is not None:
                    self.trackers.close()


def _csv_row(row: dict) -> dict:
    return {k: ("" if row.get(k) is None else row[k]) for k in METRICS_COLUMNS}


def write_metrics(path: Path, rows: list[dict]) -> None:
    """metrics.csv holding `rows`, written atomically (whole or not at all)."""
    with atomic_write(path, newline="") as f:
        writer = csv.DictWriter(f, METRICS_COLUMNS)
        writer.writeheader()
        writer.writerows(map(_csv_row, rows))


def check_resume(run_dir: Path, step: int, max_step: int) -> list[dict]:
    """The rows 0..step-1 of metrics.csv a resume at `step` keeps, read once; a step outside
    0..max_step + 1 (every step taken, run.json not yet updated) is refused."""
    if not 0 <= step <= max_step + 1:
        raise RunError(
            f"{Path(run_dir) / CHECKPOINT}: step {step}, outside this run's 0..{max_step + 1}"
        )
    return rows_before(Path(run_dir) / METRICS_CSV, step)


def rows_before(path: Path, start: int) -> list[dict]:
    """The rows of steps 0..start-1 of metrics.csv, each complete (a crash can cut a line even
    between digits); what follows them is recomputed by the resume. Anything else is a RunError
    naming the file and line: resuming would leave a wrong metrics.csv."""
    if start == 0:
        return []
    if not path.exists():
        raise RunError(f"{path}: no such file, but the checkpoint is at step {start}")
    lines = metrics_text(path, f"empty, but the checkpoint is at step {start}").split("\n")
    rows = [_checked_row(path, step, line) for step, line in zip(range(start), lines[:-1])]
    if len(rows) < start:
        have = f"rows of steps 0..{len(rows) - 1}" if rows else "no row"
        raise RunError(
            f"{path}: holds {have}, but the checkpoint is at step {start}: "
            f"rows {len(rows)}..{start - 1} are missing"
        )
    return rows


def read_rows(path: Path) -> list[dict]:
    """Every complete row of metrics.csv, checked, as floats (None where empty). Plain Python,
    without pandas: `repro status` reads it and should start in a fraction of a second."""
    return checked_rows(path, metrics_text(path))


# What `repro status` reads of metrics.csv: its last rows (about 150 bytes each), however long
# the file, in bounded memory.
TAIL_BYTES = 1 << 20  # about 7,000 steps: the paper's evaluations are 1,000 apart


def tail_rows(path: Path, limit: int = TAIL_BYTES) -> list[dict]:
    """The complete rows within metrics.csv's last `limit` bytes, checked as read_rows checks
    them (each its step, one after another), as floats (None where empty)."""
    if not Path(path).exists():
        raise RunError(f"{path}: no such file (has this run been trained?)")
    with open_regular(path, METRICS_BYTES, RunError, "a metrics file") as f:
        header = f.readline(len(",".join(METRICS_COLUMNS)) + 2)
        start = max(f.tell(), os.fstat(f.fileno()).st_size - limit)
        f.seek(start)
        data = f.read(limit)
    try:
        header, text = header.decode(), data.decode(errors="strict" if start == 0 else "ignore")
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if not header:
        raise RunError(f"{path}: empty, not a metrics file")
    if header.rstrip("\r\n") != ",".join(METRICS_COLUMNS):
        raise RunError(f"{path}: not a metrics file (line 1 is {header[:80]!r}, not its header)")
    if start > len(header):  # the window begins within a row: from the next one
        cut, _, text = text.partition("\n")
        _check_cut(path, cut)
    end = text.rfind("\n") + 1
    _check_cut(path, text[end:])  # the last line, cut short by a crash or a row being written
    lines = text[:end].split("\n")[:-1]
    first = _first_step(path, lines[0]) if lines else 0
    return [
        _numbers(_checked_row(path, first + i, line, ("step",))) for i, line in enumerate(lines)
    ]


def _numbers(row: dict) -> dict:
    return {k: float(v) if v else None for k, v in row.items()}


# A row is about 150 characters, and under 300 with each of its numbers at its longest: a longer
# piece of a line, or one holding NUL bytes (what a crash can leave of rows that never reached the
# disk), is no row cut short but a damaged file.
MAX_ROW_CHARS = 1024
# Steps are read as floats, exact up to 2**53 (16 digits): no run takes anywhere near 10**15.
MAX_STEP_DIGITS = 15


def _check_cut(path: Path, piece: str) -> None:
    """A piece of a row that the window or a crash cut: a row's, or the file is damaged."""
    if "\0" in piece:
        raise RunError(f"{path}: NUL bytes where its rows should be (the file is damaged)")
    if len(piece) > MAX_ROW_CHARS:
        raise RunError(f"{path}: a line of over {MAX_ROW_CHARS:,} characters, which no row is")


def _first_step(path: Path, line: str) -> int:
    step = line.partition(",")[0]
    if not (step.isascii() and step.isdigit() and len(step) <= MAX_STEP_DIGITS):
        raise RunError(
            f"{path}: step {step[:40]!r} is not a step (a whole number of at most "
            f"{MAX_STEP_DIGITS} digits)"
        )
    return int(step)


def metrics_text(path: Path, empty: str = "empty, not a metrics file") -> str:
    """metrics.csv's lines after its header up to the last newline (a crash or a run in progress
    can cut the last line anywhere, even between digits); an empty file is `empty`."""
    if not Path(path).exists():
        raise RunError(f"{path}: no such file (has this run been trained?)")
    try:
        text = read_regular(path, METRICS_BYTES, RunError, "a metrics file").decode()
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if not text:
        raise RunError(f"{path}: {empty}")
    header, _, rows = text.partition("\n")
    if header.rstrip("\r") != ",".join(METRICS_COLUMNS):
        raise RunError(f"{path}: not a metrics file (line 1 is {header[:80]!r}, not its header)")
    return rows[: rows.rfind("\n") + 1]


def checked_rows(path: Path, text: str) -> list[dict]:
    """The rows of `text` (metrics_text's), each checked, as floats (None where empty). The one
    judge of a metrics file's rows: every reader refuses what it refuses, in its words."""
    lines = text.split("\n")[:-1]
    rows = [_checked_row(path, step, line, ("step",)) for step, line in enumerate(lines)]
    return [{k: float(v) if v else None for k, v in row.items()} for row in rows]


def _checked_row(path: Path, step: int, line: str, required=None) -> dict:
    """The row of `step` (line step + 2 of metrics.csv), whole and numeric, with a value for
    each `required` column (default: all but the evaluations', which a resume rewrites)."""
    where = f"{path}, line {step + 2}"
    try:
        values = next(csv.reader([line.rstrip("\r")]), [])
    except csv.Error as e:  # a carriage return inside the line
        raise RunError(f"{where}: {e}") from None
    if len(values) != len(METRICS_COLUMNS):
        raise RunError(
            f"{where}: {len(values)} fields, not {len(METRICS_COLUMNS)} (expected step {step})"
        )
    row = dict(zip(METRICS_COLUMNS, values))
    if row["step"] != str(step):
        raise RunError(f"{where}: step {row['step']!r}, expected {step} (rows missing or moved)")
    for key, value in row.items():
        if value == "" and (key in required if required else not key.startswith("eval_")):
            raise RunError(f"{where}: no {key}")
        try:
            float(value or 0)
        except ValueError:
            raise RunError(f"{where}: {key} {value[:40]!r} is not a number") from None
    return row


PROGRESS_LOG = "train.log"


def duration(seconds: float) -> str:
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
