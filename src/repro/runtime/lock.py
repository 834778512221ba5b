"""One writer per run: an OS lock on the run directory.

The lock is flock(2) on <run dir>/.lock: the kernel releases it when its holder exits, however it
exits (kill -9 included), so a lock is never stale. The file names the holder (host and PID) for
the message a second writer gets. A .lock that is a symbolic link (a run folder unpacked from an
archive may hold one) is refused, never opened: writing the holder's name would erase its target.
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
from contextlib import contextmanager
from pathlib import Path

from repro.errors import ReproError
from repro.files import open_no_link

LOCK_FILE = ".lock"
HOST, PID = "host ", ", PID "  # the holder's line: "host NAME, PID N"


class LockError(ReproError):
    """A run directory another process is writing; the message names the holder."""


@contextmanager
def hold(directory: Path, what: str):
    """Hold `directory` for this process, or refuse at once naming who holds it."""
    f = _open_lock_file(Path(directory) / LOCK_FILE)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise LockError(
            f"{directory}: {what} is held by {holder}; one writer per run: wait for "
            f"it to end or stop it"
        ) from None
    f.truncate(0)
    f.write(f"{HOST}{socket.gethostname()}{PID}{os.getpid()}\n")
    f.flush()
    try:
        yield
    finally:
        f.close()  # releases the lock; the file stays, so that no two files are ever locked


def _open_lock_file(path: Path):
    try:
        fd = open_no_link(path, os.O_RDWR | os.O_CREAT, "a run's lock file", LockError)
    except OSError as e:
        raise LockError(f"{path}: cannot be opened ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockError(f"{path}: not a regular file, not a run's lock file; remove it")
    return os.fdopen(fd, "r+")


def holder(directory: Path) -> tuple[str, int] | None:
    """The (host, PID) the lock file of `directory` names, without taking the lock (asking never
    keeps a writer out); None without a readable one. The holder may have exited since."""
    try:
        text = (Path(directory) / LOCK_FILE).read_text()
    except OSError:
        return None
    host, _, pid = text.strip().removeprefix(HOST).partition(PID)
    return (host, int(pid)) if pid.isdigit() else None
