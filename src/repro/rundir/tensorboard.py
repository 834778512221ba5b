"""A run's curves as a TensorBoard event file beside its metrics.csv, written as the run trains.

A resumed run first rewrites the file up to its resume step, so the file never holds a step twice
(a crash's steps after the last checkpoint are taken again).
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter

from repro.errors import ReproError
from repro.files import WriteError, atomic_write, open_no_link, read_regular

EVENTS = "events.out.tfevents.repro"  # TensorBoard reads any file whose name holds "tfevents"
# metrics.csv column -> TensorBoard tag: one chart per tag, sections by the part before "/".
TAGS = {
    "train_loss": "loss/train",
    "eval_train_loss": "loss/eval_train",
    "eval_val_loss": "loss/eval_val",
    "eval_train_std": "loss_std/eval_train",
    "eval_val_std": "loss_std/eval_val",
    "lr": "schedule/lr",
    "tokens_per_s": "speed/tokens_per_s",
    "step_time_s": "speed/step_time_s",
}
_HEADER = struct.Struct("<QI")  # a record's length and the length's CRC
EVENTS_BYTES = 1 << 30  # about 300 bytes a step: three million steps


def kept_events(path: Path, resume_step: int) -> bytes:
    """The events of `path` before `resume_step`: none when the run starts afresh."""
    if not resume_step or not os.path.lexists(path):
        return b""
    data = read_regular(path, EVENTS_BYTES, what="a TensorBoard event file")
    try:
        return data[: end_before(data, resume_step)]
    except DecodeError:
        raise ReproError(
            f"{path}: a record that is not a TensorBoard event (damaged); remove the file to "
            f"resume (its curves are metrics.csv's, which is kept)"
        ) from None


def end_before(data: bytes, step: int) -> int:
    """The byte offset where the first event at or past `step` (or a record cut short by a crash
    mid-write) in an event file's `data` begins: their length when there is none. A record
    whose payload is not an Event is a DecodeError."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, _ = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + length + 4
        if end > len(data) or Event.FromString(data[offset + _HEADER.size : end - 4]).step >= step:
            break
        offset = end
    return offset


class EventLog:
    """The event file of the run in `run_dir`, its events at or past `resume_step` dropped."""

    def __init__(self, run_dir: Path, resume_step: int):
        self.path, self.failed = Path(run_dir) / EVENTS, False
        kept = kept_events(self.path, resume_step)
        # The kept events rewritten as a new file (never through a link), then appended to.
        with atomic_write(self.path, "wb") as f:
            f.write(kept)
        try:
            fd = open_no_link(self.path, os.O_WRONLY | os.O_APPEND, "a run's event file")
        except OSError as e:
            raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None
        self.records = RecordWriter(open(fd, "ab"))
        if not kept:
            self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, event: Event) -> None:
        try:
            self.records.write(event.SerializeToString())
            self.records.flush()  # live: TensorBoard sees each step as soon as it is logged
        except OSError as e:  # a full disk: a reader skips the event cut short (end_before)
            self.failed = True
            raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None

    def append(self, row: dict) -> None:
        """One metrics.csv row (a dict of floats, None where a column is empty)."""
        values = [
            Summary.Value(tag=tag, simple_value=row[column])
            for column, tag in TAGS.items()
            if row.get(column) is not None
        ]
        self._write(Event(wall_time=time.time(), step=row["step"], summary=Summary(value=values)))

    def close(self) -> None:
        try:
            self.records.close()
        except OSError as e:  # the event left in the buffer: after a failed write, said already
            if not self.failed:
                raise WriteError(f"{self.path}: cannot be written ({e.strerror})") from None


def write_events(run_dir: Path, rows: list[dict]) -> None:
    """The event file of a run whose metrics are written at once (an import), afresh."""
    log = EventLog(run_dir, 0)
    for row in rows:
        log.append(row)
    log.close()
