"""One writer per run: an OS lock on the run directory.

flock(2) on <run dir>/.lock: the kernel releases it however its holder exits, so it is never stale.
A .lock that is a symbolic link is refused: writing the holder's name would erase its target.
"""

from __future__ import annotations

import fcntl
import os
import socket
import stat
from contextlib import contextmanager
from pathlib import Path

from repro.errors import ReproError
from repro.files import open_no_link, read_regular

LOCK_FILE = ".lock"
HOST, PID = "host ", ", PID "  # the holder's line: "host NAME, PID N"
LOCK_BYTES = 4096  # a holder's line, with room
MAX_PID = 2**22  # Linux's largest (pid_max's limit); a larger number names no process


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
    keeps a writer out); None without a readable one. The holder may have exited: see held_here."""
    try:
        text = read_regular(Path(directory) / LOCK_FILE, LOCK_BYTES, what="a run's lock file")
    except ReproError:
        return None
    host, _, pid = text.decode(errors="replace").strip().removeprefix(HOST).partition(PID)
    valid = pid.isascii() and pid.isdigit() and 0 < int(pid) <= MAX_PID
    return (host, int(pid)) if valid else None


def held_here(directory: Path) -> bool:
    """Whether a process of this machine holds the lock of `directory` now, by /proc/locks (a PID
    alive is not enough: it may have been reused); without /proc/locks, whether the PID is alive."""
    path = Path(directory) / LOCK_FILE
    try:
        info = os.stat(path)
        file = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
        with open("/proc/locks") as f:
            return any(_locked_file(line) == file for line in f)
    except FileNotFoundError:
        named = holder(directory)
        return named is not None and os.path.lexists(path) and _alive(named[1])
    except OSError:
        return False


def _locked_file(line: str) -> tuple[int, int, int] | None:
    """(device major, minor, inode) of a flock(2) lock of a /proc/locks line ("1: FLOCK ADVISORY
    WRITE 573 fe:00:2149443 0 EOF": the device numbers in hex), None for a line of another kind."""
    fields = line.split()
    if len(fields) < 6 or fields[1] != "FLOCK":
        return None
    numbers = fields[5].split(":")
    try:
        major, minor, inode = int(numbers[0], 16), int(numbers[1], 16), int(numbers[2])
    except (ValueError, IndexError):
        return None
    return major, minor, inode


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True
