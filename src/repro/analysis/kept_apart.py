"""One preset's tables and figures never replaced by another's.

The workflow writes the configured preset's products to results/ (results/table1.csv, the
figures, ...). Before a run at another preset replaces them, they move to results/<preset>/,
relative paths kept: each notebook's executed copy (results/notebooks/NAME.ipynb) names the
preset it ran at (papermill's parameters), and its rule's other products go with it.

Notebooks run by hand write to results/<preset>/ themselves, so a file there may be the user's.
A move replaces only a file it put there itself, as results/.kept_apart.json records (the SHA-256
of each file moved, under its path in results/), or one with the incoming file's bytes. Any other
file there (a table of a notebook run by hand, a link, a folder, a pipe) is left as it is and the
incoming one kept beside it as NAME.workflow.EXT (NAME.workflow-2.EXT, ... where that is taken),
with a line saying so. A record that cannot be read counts as empty: nothing is replaced then.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from repro.config import is_preset_name
from repro.errors import ReproError
from repro.files import file_sha256, make_dir, read_json, write_json

RESULTS = Path("results")
RECORD = ".kept_apart.json"  # in results/: {path under results/: SHA-256 of the file moved there}


def preset_of(notebook: Path) -> str:
    """The preset an executed notebook ran at; a ReproError where it is unreadable or names none."""
    data = read_json(notebook)
    try:
        preset = data["metadata"]["papermill"]["parameters"]["preset"]
    except (KeyError, TypeError):
        raise ReproError(f"{notebook}: names no preset (papermill's parameters)") from None
    if not is_preset_name(preset):
        raise ReproError(f"{notebook}: preset {preset!r} is not a preset's name (a folder name)")
    return preset


def keep_apart(products: dict[str, list[str]], preset: str, results: Path = RESULTS) -> list[str]:
    """Move each group of `products` (executed notebook -> every file its rule writes, under
    `results`) whose notebook ran at a preset other than `preset` to results/<that preset>/;
    lines for the user: one per preset moved, one per file kept beside another's, one per
    notebook that names no preset."""
    said, moved = [], {}
    record = _read_record(results)
    for notebook, files in products.items():
        if not os.path.lexists(notebook):
            continue
        try:
            earlier = preset_of(Path(notebook))
        except ReproError as e:
            said.append(f"{e}: its products stay in {results}/ (a run may replace them)")
            continue
        if earlier == preset:
            continue
        # The notebook last: a run stopped on the way finds the others again by it.
        for name in sorted(files, key=lambda name: name == notebook):
            said += _move(Path(name), results, earlier, record)
        moved.setdefault(earlier, []).append(Path(notebook).stem)
    return said + [
        f"{results}/: preset {earlier}'s {', '.join(names)} moved to {results / earlier}/ "
        f"(this run is preset {preset}'s)"
        for earlier, names in moved.items()
    ]


def _move(source: Path, results: Path, preset: str, record: dict) -> list[str]:
    """`source` moved to results/<preset>/, over no file this module did not put there."""
    if not _is_file(source):
        return []  # missing, or nothing the workflow wrote
    key = str(Path(preset) / source.relative_to(results))
    target = results / key
    make_dir(target.parent)  # a file in the way: one line, and the run stops before any job
    digest = file_sha256(source)
    if os.path.lexists(target) and not _holds(target, {record.get(key), digest}):
        beside = _free_name(target)
        os.replace(source, beside)
        return [
            f"{target}: not the workflow's (a notebook run by hand?), left as it is; "
            f"{source} kept beside it as {beside}"
        ]
    record[key] = digest
    write_json(results / RECORD, record)  # first: a stop between the two leaves no file unrecorded
    os.replace(source, target)
    return []


def _read_record(results: Path) -> dict:
    path = results / RECORD
    try:
        record = read_json(path) if os.path.lexists(path) else {}
    except ReproError:
        return {}
    return record if isinstance(record, dict) else {}


def _is_file(path: Path) -> bool:
    """Whether `path` is a regular file itself (no link, folder or pipe)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _holds(path: Path, digests: set) -> bool:
    """Whether `path` is a regular file whose SHA-256 is one of `digests`."""
    return _is_file(path) and file_sha256(path) in digests


def _free_name(target: Path) -> Path:
    """NAME.workflow.EXT beside `target`, or NAME.workflow-2.EXT, ..., the first not taken."""
    number = 1
    while True:
        tag = "" if number == 1 else f"-{number}"
        beside = target.with_name(f"{target.stem}.workflow{tag}{target.suffix}")
        if not os.path.lexists(beside):
            return beside
        number += 1
