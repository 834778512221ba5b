"""The package's files: atomic writes, bounded JSON reads, hashes.

Every write lands under a temporary name of its own and is renamed over the target when complete:
a crash never leaves half a file, no user's file is removed, and no write follows a symbolic link
(an unpacked run folder may hold some). Appended files are opened by open_no_link.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

from repro.errors import ReproError


class WriteError(ReproError):
    """A file or folder that cannot be written; the message names it and the reason."""


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs):
    """A temporary file beside `path`, renamed over it on success, removed on failure."""
    with _replacing(path) as (_, fd):
        with open(fd, mode, **open_kwargs) as f:
            yield f


@contextmanager
def _replacing(path: str | os.PathLike):
    path = Path(path)
    refuse_special(path)
    partial, fd = new_partial(path)
    try:
        try:
            yield partial, fd
            os.replace(partial, path)
        except OSError as e:
            raise WriteError(f"{path}: cannot be written ({e.strerror or e})") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


# What a rename would replace that is no file: run as root, `--out /dev/null` would put a regular
# file where the device was. A folder fails the rename by itself.
SPECIAL_FILES = {
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISFIFO: "a named pipe",
    stat.S_ISSOCK: "a socket",
}


def refuse_special(path: Path) -> None:
    """A WriteError where `path` is, or links to, a device, named pipe or socket."""
    try:
        mode = os.stat(path).st_mode  # through a link: a link to /dev/null is refused too
    except OSError:  # nothing there (or a dangling link): the write says what else is wrong
        return
    for test, kind in SPECIAL_FILES.items():
        if test(mode):
            link = " (through a symbolic link)" if path.is_symlink() else ""
            raise WriteError(f"{path}: {kind}{link}, not a file: nothing written there")


def new_partial(path: Path) -> tuple[Path, int]:
    """A new empty file .NAME.<random>.partial beside `path` and its descriptor."""
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600
    except OSError as e:
        raise WriteError(f"{path}: cannot be written ({e.strerror})") from None
    return Path(name), fd


def open_no_link(path: Path, flags: int, what: str, error: type[ReproError] = ReproError) -> int:
    """`path` opened with os.open's `flags`, never through a symbolic link (an `error`)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise error(
                f"{path}: a symbolic link, not {what}; remove the link (its target is left "
                f"untouched)"
            ) from None
        raise


@contextmanager
def atomic_folder(path: str | os.PathLike, whole: bool = False):
    """A new folder NAME.<random>.partial to fill; on success its files move into `path` (other
    files of `path` kept) or, `whole`, it replaces `path` entirely; on failure it is removed:
    `path` never holds part of a write."""
    path = Path(path)
    real = path.resolve()  # the partial folder on the file system of `path`: renames, no copies
    try:
        partial = Path(tempfile.mkdtemp(prefix=real.name + ".", suffix=".partial", dir=real.parent))
        os.chmod(partial, 0o777 & ~_umask())  # mkdtemp's 0700: the mode of any folder made here
    except OSError as e:
        raise WriteError(f"{real}.partial: cannot be created ({e.strerror})") from None
    try:
        yield partial
        for entry in partial.iterdir():
            os.chmod(entry, (0o777 if entry.is_dir() else 0o666) & ~_umask())
        try:
            if real.is_dir() and whole:
                _swap(partial, real)
            elif real.is_dir():
                for entry in sorted(partial.iterdir()):
                    os.replace(entry, real / entry.name)
                partial.rmdir()
            else:
                os.rename(partial, real)
        except OSError as e:
            raise WriteError(f"{path}: cannot be written ({e.strerror})") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _swap(new: Path, folder: Path) -> None:
    """`new` renamed to `folder`, whose earlier content is removed once it is; on failure the
    earlier folder is put back. Each step is one rename: no moment holds part of each."""
    aside = Path(tempfile.mkdtemp(prefix=folder.name + ".", suffix=".old", dir=folder.parent))
    os.rename(folder, aside)  # onto the empty folder mkdtemp made
    try:
        os.rename(new, folder)
    except BaseException:
        os.rename(aside, folder)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_dir(path: str | os.PathLike) -> Path:
    """Directory `path` created with its parents; a one-line error when it cannot be written."""
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


def write_json(path: str | os.PathLike, data, default=None) -> None:
    with atomic_write(path) as f:
        f.write(json.dumps(data, indent=2, default=default) + "\n")


# The result tables' numbers: 9 significant digits give back every float32 loss exactly.
CSV_FLOAT_FORMAT = "%.9g"


# Floats from here on are not all integers (2**53 + 1 is none): a count is below it, a loss of
# 1e20 is no count and stays a float.
EXACT_INTEGERS = 2**53


def write_csv(table, path: str | os.PathLike) -> Path:
    """A DataFrame as CSV without its index; a float column of whole numbers (counts) written as
    integers."""
    path = Path(path)
    make_dir(path.parent)
    whole = [name for name, column in table.items() if _counts(column)]
    with atomic_write(path, newline="") as f:
        table.astype(dict.fromkeys(whole, "Int64")).to_csv(
            f, index=False, float_format=CSV_FLOAT_FORMAT
        )
    return path


def _counts(column) -> bool:
    """Whether a float column holds whole numbers within EXACT_INTEGERS alone (NaN aside)."""
    values = column.dropna()
    return (
        column.dtype.kind == "f"
        and len(values) > 0
        and bool(values.abs().le(EXACT_INTEGERS).all())
        and values.map(float.is_integer).all()
    )


def copy_file(source: str | os.PathLike, dest: str | os.PathLike) -> None:
    with open_regular(source, COPY_BYTES) as read, atomic_write(dest, "wb") as f:
        shutil.copyfileobj(read, f)


# What reading a small file of the package (run.json, a manifest, a model's config.json) takes
# at most: a larger one is not one the package wrote.
JSON_BYTES = 64 << 20
COPY_BYTES = 1 << 40  # a copy reads a regular file to its end: no limit of its own


def open_regular(
    path: str | os.PathLike, limit: int, error: type[ReproError] = ReproError, what: str = "a file"
):
    """`path` open if a regular file within `limit`: a pipe would block, a device never end."""
    try:  # O_NONBLOCK: opening a named pipe must not wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        dangling = f" (a symbolic link to {os.readlink(path)})" if os.path.islink(path) else ""
        raise error(f"{path}: no such file{dangling}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:  # no O_NOFOLLOW here: links that lead back to themselves
            raise error(f"{path}: a symbolic link loop (the link leads back to itself)") from None
        raise error(f"{path}: cannot be read ({e.strerror})") from None
    info = os.fstat(fd)
    problem = (
        f"not a regular file ({what} is expected)"
        if not stat.S_ISREG(info.st_mode)
        else f"{info.st_size:,} bytes, more than {limit:,}: not {what}"
        if info.st_size > limit
        else None
    )
    if problem:
        os.close(fd)
        raise error(f"{path}: {problem}")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(
    path: str | os.PathLike, limit: int, error: type[ReproError] = ReproError, what: str = "a file"
) -> bytes:
    """The bytes of `path` (open_regular), read no further than `limit` even if it grows."""
    with open_regular(path, limit, error, what) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise error(f"{path}: cannot be read ({e.strerror})") from None
    if len(data) > limit:
        raise error(f"{path}: more than {limit:,} bytes: not {what}")
    return data


def read_json(path: str | os.PathLike, error: type[ReproError] = ReproError, hint: str = ""):
    path = Path(path)
    if not os.path.lexists(path):
        raise error(f"{path}: no such file{f' ({hint})' if hint else ''}")
    try:
        text = read_regular(path, JSON_BYTES, error, "a JSON file").decode()
    except UnicodeDecodeError as e:
        raise error(f"{path}: not valid JSON ({e})") from None
    return parse_json(text, str(path), error)


# The bounds of every JSON the package reads, far beyond what it writes: a value past them would end
# in a traceback or a hang (a 5,000-digit integer cannot be printed; a step of 10**18 never ends).
JSON_MAX_DEPTH = 32  # objects and arrays within one another
JSON_MAX_DIGITS = 18  # an integer's digits: below 2**63, what a step or a count can be


def parse_json(text: str, where: str, error: type[ReproError] = ReproError):
    """`text` as JSON within JSON_MAX_DEPTH and JSON_MAX_DIGITS; else an `error` naming `where`."""
    try:
        data = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e})") from None
    except ValueError as e:  # _bounded_int's, or a float json cannot read
        raise error(f"{where}: not valid JSON ({e})") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise error(f"{where}: nested more than {JSON_MAX_DEPTH} levels deep") from None
    if _depth(data) > JSON_MAX_DEPTH:
        raise error(f"{where}: nested more than {JSON_MAX_DEPTH} levels deep")
    return data


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > JSON_MAX_DIGITS:
        raise ValueError(f"an integer of {len(digits):,} digits, more than {JSON_MAX_DIGITS}")
    return int(digits)


def _depth(data, limit: int = JSON_MAX_DEPTH + 1) -> int:
    if not isinstance(data, dict | list) or limit == 0:
        return 0
    children = data.values() if isinstance(data, dict) else data
    return 1 + max((_depth(c, limit - 1) for c in children), default=0)


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()
