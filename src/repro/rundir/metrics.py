"""metrics.csv: one row an optimiser step, written as TensorBoard events too
(repro.runtime.tensorboard); and the check that a resume keeps exactly the rows before it.

Training writes the rows through this module and the results read them back through it, so the
columns are defined once.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from repro.files import WriteError, atomic_write, open_no_link, read_regular
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
    """metrics.csv, one row per optimiser step, and the same rows as TensorBoard events
    (repro.runtime.tensorboard) beside it, holding the `kept` rows a resume keeps (check_resume's)
    and none past them.

    With path None, rows are taken and dropped: a DDP rank other than 0 writes nothing."""

    def __init__(self, path: Path | None, kept: list[dict]):
        self.path, self.file, self.failed = path, None, False
        if path is None:
            return
        # Imported here: tensorboard's modules load in a fraction of a second, which only the
        # writers of a run (training, importing) should pay, not every reader of results.
        from repro.runtime.tensorboard import EventLog

        self.events = EventLog(path.parent, len(kept))
        # Rewrite the kept rows atomically: a crash here loses no finished row.
        write_metrics(path, kept)
        fd = open_no_link(path, os.O_WRONLY | os.O_APPEND, "a run's metrics")
        self.file = open(fd, "a", newline="")
        self.writer = csv.DictWriter(self.file, METRICS_COLUMNS)

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

    def close(self) -> None:
        if self.file is None:
            return
        try:
            self.file.close()
        except OSError as e:  # the row left in the buffer: after a failed append, said already
            if not self.failed:
                raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None
        finally:
            self.events.close()


def _csv_row(row: dict) -> dict:
    return {k: ("" if row.get(k) is None else row[k]) for k in METRICS_COLUMNS}


def write_metrics(path: Path, rows: list[dict]) -> None:
    """metrics.csv holding `rows`, written atomically (whole or not at all)."""
    with atomic_write(path, newline="") as f:
        writer = csv.DictWriter(f, METRICS_COLUMNS)
        writer.writeheader()
        writer.writerows(map(_csv_row, rows))


def check_resume(run_dir: Path, step: int, max_step: int) -> list[dict]:
    """The rows 0..step-1 of metrics.csv a resume at `step` (its checkpoint's) keeps, read once;
    refused where the run would end with wrong data: a step outside 0..max_step + 1 (max_step + 1:
    every step taken, run.json not yet updated), or a metrics.csv without exactly those rows
    (rows_before)."""
    if not 0 <= step <= max_step + 1:
        raise RunError(
            f"{Path(run_dir) / CHECKPOINT}: step {step}, outside this run's 0..{max_step + 1}"
        )
    return rows_before(Path(run_dir) / METRICS_CSV, step)


def rows_before(path: Path, start: int) -> list[dict]:
    """The rows of steps 0..start-1 of metrics.csv, each checked: what a resume at `start` keeps.

    Rows are appended in step order, one whole line each, so a run resumed at `start` needs
    exactly the first `start` lines after the header, each complete (ending in a newline: a
    crash can cut the last line anywhere, even between digits). Whatever follows them (rows of
    steps the checkpoint has not taken, a line cut by a crash) is recomputed by the resume and
    dropped. Anything else (rows missing, out of order or damaged, another header, an empty
    file) is a RunError naming the file and line: resuming would leave a wrong metrics.csv."""
    if start == 0:
        return []
    if not path.exists():
        raise RunError(f"{path}: no such file, but the checkpoint is at step {start}")
    complete = _complete_lines(path, f"empty, but the checkpoint is at step {start}")
    rows = [_checked_row(path, step, line) for step, line in zip(range(start), complete)]
    if len(rows) < start:
        have = f"rows of steps 0..{len(rows) - 1}" if rows else "no row"
        raise RunError(
            f"{path}: holds {have}, but the checkpoint is at step {start}: "
            f"rows {len(rows)}..{start - 1} are missing"
        )
    return rows


def read_rows(path: Path) -> list[dict]:
    """Every complete row of metrics.csv, checked (steps 0, 1, ... in order, each value a
    number), its values as floats (None where empty: evaluation columns between evaluations, the
    timings of an imported run). A line cut by a run in progress is left out. Plain Python: what
    `repro status` reads, which should start in a fraction of a second, without pandas."""
    lines = _complete_lines(path, "empty, not a metrics file")
    rows = [_checked_row(path, step, line, ("step",)) for step, line in enumerate(lines)]
    return [{k: float(v) if v else None for k, v in row.items()} for row in rows]


def _complete_lines(path: Path, empty: str) -> list[str]:
    """The lines after metrics.csv's header that end in a newline (a crash or a run in progress
    can cut the last line anywhere, even between digits); an empty file is `empty`."""
    try:
        lines = read_regular(path, METRICS_BYTES, RunError, "a metrics file").decode().split("\n")
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if lines == [""]:
        raise RunError(f"{path}: {empty}")
    if lines[0].rstrip("\r") != ",".join(METRICS_COLUMNS):
        raise RunError(f"{path}: not a metrics file (line 1 is {lines[0][:80]!r}, not its header)")
    return lines[1:-1]  # the last piece is what follows the last newline


def _checked_row(path: Path, step: int, line: str, required=None) -> dict:
    """The row of `step` (line step + 2 of metrics.csv), whole and numeric, with a value for
    each `required` column (default: all but the evaluations', which a resume rewrites)."""
    values = next(csv.reader([line.rstrip("\r")]), [])
    where = f"{path}, line {step + 2}"
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
