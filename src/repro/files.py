"""Writing and reading the package's files: atomic writes, JSON with errors naming the file, hashes.

Every file the package writes goes through atomic_write: the content lands under a temporary name
and is renamed over the target only when complete, so a crash never leaves a half-written file, and
a stale temporary file from an earlier crash is simply overwritten.
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
    try:
        with open(partial, mode, **open_kwargs) as f:
            yield f
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


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
    except OSError as e:
        raise error(f"{path}: cannot be read ({e.strerror})") from None


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
