"""A run directory: run.json (what was run, on what, how it ended) and metrics.csv (one row a step,
also written as a TensorBoard event file, repro.runtime.tensorboard).

Training writes both through this module and the results read them back through it, so the record's
fields and the metrics' columns are defined once. Directories written by earlier versions of the
package (run.json without `format`) are read too: their identity is translated to today's layout.
"""

from __future__ import annotations

import csv
import os
import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import repro
from repro.errors import ReproError
from repro.files import (
    WriteError,
    atomic_write,
    copy_file,
    open_no_link,
    read_json,
    read_regular,
    write_json,
)

RUN_JSON, METRICS_CSV, CHECKPOINT = "run.json", "metrics.csv", "ckpt.pt"
METRICS_BYTES = 1 << 30  # metrics.csv takes about 150 bytes a step: a million steps, with room
LIVE = "live"  # where `repro train` works in the workflow's run folders (rules/train.smk)
RECORD_FORMAT = "repro-run/2"
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
FINISHED = ("completed", "diverged")


class RunError(ReproError):
    """A run directory that cannot be (re)started or read as asked; the message names it."""


@dataclass
class RunRecord:
    """run.json. `identity` is RunConfig.identity(); `config` the whole preset and experiment."""

    status: str  # running, completed or diverged (an imported run may have "stopped")
    preset: str
    experiment: str
    identity: dict
    config: dict
    params: dict  # total_params, non_embedding_params
    tokens_per_step: int
    last_step: int | None = None
    diverged_step: int | None = None
    diverged_reason: str | None = None  # what the divergence stop saw (repro.train)
    data: dict = field(default_factory=dict)  # token files: dir, source, counts and hashes
    indices: dict = field(default_factory=dict)  # dir and the index files' hashes
    package_version: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    torch_version: str | None = None
    python_version: str | None = None
    device: str | None = None
    compile: bool | None = None
    fused_projection: bool | None = None
    train_micro_batch: int | None = None
    world_size: int | None = None  # processes (torchrun ranks) of the latest session
    torch_threads: int | None = None  # torch's CPU threads in the latest session
    malloc: str | None = None  # the C allocator of the latest session: tcmalloc or glibc
    # What bit-for-bit equality with an uninterrupted run depends on, per training session
    # (docs/runs.md, "What exact resume means"): the first step, device, threads, versions...
    sessions: list = field(default_factory=list)
    started: str | None = None
    finished: str | None = None
    source: str = "repro"  # "authors": imported by repro.authors.runs, never trained over
    format: str = RECORD_FORMAT

    def session(self) -> dict:
        """The settings of this training process that exactness depends on, from the step it
        started at (one entry of `sessions`, which a resumed run extends)."""
        keys = ("device", "torch_threads", "torch_version", "train_micro_batch", "world_size")
        keys += ("compile", "fused_projection")
        first = 0 if self.last_step is None else self.last_step + 1
        return {"first_step": first} | {key: getattr(self, key) for key in keys}

    @property
    def finished_training(self) -> bool:
        return self.status in FINISHED

    def write(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / RUN_JSON, asdict(self))


def files_dir(run_dir: str | Path) -> Path:
    """Where a run's files are: the run folder once training has ended, else its live/ folder
    (a run in progress, or stopped part-way)."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_JSON).exists() and (run_dir / LIVE / RUN_JSON).exists():
        return run_dir / LIVE
    return run_dir


def read_record(run_dir: str | Path) -> RunRecord:
    """run.json of a run directory, in today's layout whatever version of the package wrote it."""
    path = Path(run_dir) / RUN_JSON
    data = read_json(path, RunError, "has this run been trained?")
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a run record (a {type(data).__name__})")
    if "format" not in data:
        try:
            data = _legacy_record(data)
        except (KeyError, TypeError) as e:
            raise RunError(f"{path}: not a run record (no {e} of an earlier version's)") from None
    known = {f.name for f in fields(RunRecord)}
    try:
        return RunRecord(**{k: v for k, v in data.items() if k in known})
    except TypeError as e:
        raise RunError(f"{path}: not a run record ({e})") from None


def _legacy_record(data: dict) -> dict:
    """run.json as the package wrote it before `format` (up to commit 0d4add5)."""
    data = dict(data)
    data["train_micro_batch"] = data.pop("micro_batch", None)
    eval_micro_batch = data["config"]["preset"]["train"]["micro_batch"]
    data["identity"] = legacy_identity(data["identity"], eval_micro_batch)
    return data | {"format": RECORD_FORMAT}


def legacy_identity(identity: dict, eval_micro_batch: int) -> dict:
    """An identity of the old layout (preset/experiment/model) in today's (model/train/optimizer).

    The old one left out the micro-batch, which sets how evaluation batches; it is passed in."""
    if "preset" not in identity:
        return identity
    train = {
        k: v
        for k, v in identity["preset"]["train"].items()
        if k not in ("table_step", "checkpoint_interval")
    }  # now report and runtime settings
    e = identity["experiment"]
    return {
        "model": identity["model"],
        "train": train | {"eval_micro_batch": eval_micro_batch},
        "optimizer": {
            "lr_max": e["lr_max"],
            "lr_min": e["lr_min"],
            "weight_decay": e["weight_decay"],
        },
    }


def identity_differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two identities (or exist in only one)."""
    keys = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += identity_differences(a, b, f"{prefix}{key}.")
        elif a != b or (key in old) != (key in new):
            keys.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return keys


def publish(run_dir: Path, dest: Path) -> None:
    """Copy a run's metrics.csv and run.json to dest (the workflow's declared outputs), each
    atomically."""
    for name in (METRICS_CSV, RUN_JSON):
        copy_file(Path(run_dir) / name, Path(dest) / name)


def code_version() -> dict:
    """The package version and, in a git checkout, the commit and whether the tree was dirty."""
    src = Path(__file__).resolve().parent

    def git(*args):
        try:
            return subprocess.run(
                ["git", "-C", str(src), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    commit = git("rev-parse", "HEAD")
    return {
        "package_version": repro.__version__,
        "git_commit": commit,
        "git_dirty": bool(git("status", "--porcelain")) if commit else None,
    }


class MetricsLog:
    """metrics.csv, one row per optimiser step, and the same rows as TensorBoard events
    (repro.runtime.tensorboard) beside it; rows at or past a resume point dropped from both.

    With path None, rows are taken and dropped: a DDP rank other than 0 writes nothing."""

    def __init__(self, path: Path | None, resume_step: int):
        self.path, self.file, self.failed = path, None, False
        if path is None:
            return
        # Imported here: tensorboard's modules load in a fraction of a second, which only the
        # writers of a run (training, importing) should pay, not every reader of results.
        from repro.runtime.tensorboard import EventLog

        self.events = EventLog(path.parent, resume_step)
        # Rewrite the kept rows atomically: a crash here loses no finished row.
        write_metrics(path, rows_before(path, resume_step))
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


def check_resume(run_dir: Path, step: int, max_step: int) -> None:
    """Refuse to resume a run at `step` (its checkpoint's) where the run would end with wrong
    data: a step outside 0..max_step + 1 (max_step + 1: every step taken, run.json not yet
    updated), or a metrics.csv without exactly its rows 0..step-1 (rows_before)."""
    if not 0 <= step <= max_step + 1:
        raise RunError(
            f"{Path(run_dir) / CHECKPOINT}: step {step}, outside this run's 0..{max_step + 1}"
        )
    rows_before(Path(run_dir) / METRICS_CSV, step)


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
    try:
        lines = read_regular(path, METRICS_BYTES, RunError, "a metrics file").decode().split("\n")
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if lines == [""]:
        raise RunError(f"{path}: empty, but the checkpoint is at step {start}")
    if lines[0].rstrip("\r") != ",".join(METRICS_COLUMNS):
        raise RunError(f"{path}: not a metrics file (line 1 is {lines[0][:80]!r}, not its header)")
    complete = lines[1:-1]  # the last piece is what follows the last newline
    rows = [_checked_row(path, step, line) for step, line in zip(range(start), complete)]
    if len(rows) < start:
        have = f"rows of steps 0..{len(rows) - 1}" if rows else "no row"
        raise RunError(
            f"{path}: holds {have}, but the checkpoint is at step {start}: "
            f"rows {len(rows)}..{start - 1} are missing"
        )
    return rows


def _checked_row(path: Path, step: int, line: str) -> dict:
    """The row of `step` (line step + 2 of metrics.csv), whole and numeric."""
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
        if value == "" and not key.startswith("eval_"):
            raise RunError(f"{where}: no {key}")
        try:
            float(value or 0)
        except ValueError:
            raise RunError(f"{where}: {key} {value[:40]!r} is not a number") from None
    return row
