"""Token files as training reads them: train.bin / val.bin (uint16) and manifest.json.

The manifest, written by `repro prepare` (repro.prepare), lists each split's file, document and
token counts and SHA-256; reading checks the files against it. Nothing here imports the
preparation side (datasets, pyarrow): training reads token files without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from repro.files import ReproError, file_sha256, read_json

MANIFEST = "manifest.json"


class DataError(ReproError):
    """A corpus, token file or manifest that cannot be used; the message names the file or field."""


def _verify_split(data_dir: Path, entry: dict) -> None:
    path = data_dir / entry["file"]
    expected = 2 * entry["tokens"]
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (listed in {MANIFEST})") from None
    if actual != expected:
        raise DataError(f"{path}: {actual:,} bytes, expected {expected:,} (2 x {entry['tokens']:,} "
                        f"tokens in {MANIFEST}): truncated or not this manifest's file")
    if file_sha256(path) != entry["sha256"]:
        raise DataError(f"{path}: SHA-256 differs from {MANIFEST}'s {entry['sha256']}")


def read_manifest(data_dir: str | os.PathLike, verify: bool = True) -> dict:
    """The manifest of a prepared directory; with verify, check each split file's size and hash."""
    data_dir = Path(data_dir)
    path = data_dir / MANIFEST
    manifest = read_json(path, DataError, "run `repro prepare` first")
    for field in ("source", "tokenizer", "splits"):
        if field not in manifest:
            raise DataError(f"{path}: missing field {field!r}")
    for name, entry in manifest["splits"].items():
        for field in ("file", "documents", "tokens", "sha256"):
            if field not in entry:
                raise DataError(f"{path}: missing field splits.{name}.{field}")
        if verify:
            _verify_split(data_dir, entry)
    return manifest


def token_memmap(data_dir: str | os.PathLike, manifest: dict, split: str) -> np.memmap:
    """A split's tokens, read-only uint16, as the manifest (read_manifest's) lists them."""
    if split not in manifest["splits"]:
        raise DataError(f"{Path(data_dir) / MANIFEST}: no split {split!r} "
                        f"(splits: {', '.join(manifest['splits'])})")
    entry = manifest["splits"][split]
    path = Path(data_dir) / entry["file"]
    try:
        tokens = np.memmap(path, dtype=np.uint16, mode="r")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (listed in {MANIFEST})") from None
    if len(tokens) != entry["tokens"]:
        raise DataError(f"{path}: {len(tokens):,} tokens, {MANIFEST} says {entry['tokens']:,}")
    return tokens


def token_files(manifest: dict) -> dict:
    """What a split's tokens are, for the indices sidecar and run.json: count and SHA-256."""
    return {split: {"tokens": manifest["splits"][split]["tokens"],
                    "sha256": manifest["splits"][split]["sha256"]} for split in ("train", "val")}
