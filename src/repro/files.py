"""Writing and reading the package's files: atomic writes, JSON with errors naming the file, hashes.

Every file the package writes goes through atomic_write: the content lands under a temporary name
and is renamed over the target only when complete, so a crash never leaves a half-written file, and
a stale temporary file from an earlier crash is simply replaced. No write follows a symbolic link
(a run folder unpacked from an archive may hold some): the temporary file is created anew, never
opened through a link, and the rename replaces a link at the target, never the file it points to.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from repro.errors import ReproError


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs):
    """Open `path`.partial for writing; rename it over `path` on success, remove it on failure."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    fd = open_new(partial)
    try:
        with open(fd, mode, **open_kwargs) as f:
            yield f
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def open_new(path: Path) -> int:
    """A file descriptor of `path` created empty for writing, whatever was there (a stale file, a
    symbolic link: removed, its target untouched); a one-line error when it cannot be created."""
    try:
        path.unlink(missing_ok=True)
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    except OSError as e:
        raise ReproError(f"{path}: cannot be written ({e.strerror})") from None


def make_dir(path: str | os.PathLike) -> Path:
    """Directory `path` for the package's output, created with its parents; a one-line error when
    it is a file or cannot be created or written."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ReproError(f"{path}: exists and is not a directory") from None
    except OSError as e:
        raise ReproError(f"{path}: cannot be created ({e.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ReproError(f"{path}: not writable (read-only folder or file system)")
    return path


def free_bytes(path: str | os.PathLike) -> int:
    """Free space on the file system holding `path` (tests replace this to simulate a full disk)."""
    return shutil.disk_usage(path).free


def write_json(path: str | os.PathLike, data) -> None:
    with atomic_write(path) as f:
        f.write(json.dumps(data, indent=2) + "\n")


def read_json(path: str | os.PathLike, error: type[ReproError] = ReproError, hint: str = ""):
    """The JSON content of `path`; a missing or unreadable file is an `error` naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: no such file{f' ({hint})' if hint else ''}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: not valid JSON ({e})") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise error(f"{path}: not valid JSON (nested too deeply)") from None
    except OSError as e:
        raise error(f"{path}: cannot be read ({e.strerror})") from None


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
