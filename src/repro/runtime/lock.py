"""One writer per run: an OS lock on the run directory, and stopping when told to or orphaned.

The lock is flock(2) on <run dir>/.lock: the kernel releases it when its holder exits, however it
exits (kill -9 included), so a lock is never stale. The file names the holder (host and PID) for
the message a second writer gets. A .lock that is a symbolic link (a run folder unpacked from an
archive may hold one) is refused, never opened: writing the holder's name would erase its target.

A trainer started by the workflow asks Linux to send it SIGTERM when its parent dies
(PR_SET_PDEATHSIG); SIGTERM makes it checkpoint and stop (repro.runtime.preemption).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import stat
import sys
from contextlib import contextmanager
from pathlib import Path

from repro.errors import ReproError
from repro.files import open_no_link

LOCK_FILE = ".lock"
HOST, PID = "host ", ", PID "  # the holder's line: "host NAME, PID N"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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


def exit_with_parent(parent: int | None = None) -> None:
    """Have Linux send this process SIGTERM when its parent dies (elsewhere, nothing).

    `parent`: the PID the parent had when this process started, to catch a parent that died
    before this call (the signal is only for a death after it): then SIGTERM now. PID 1 as the
    parent means the parent had died already."""
    if sys.platform != "linux":
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if parent is not None and (parent == 1 or os.getppid() != parent):
        print(f"repro: the parent process ({parent}) has exited; stopping", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)
