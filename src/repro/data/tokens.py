"""Token files: train.bin / val.bin (uint16) and manifest.json, written by write_token_files (the
one writer) and read as training reads them. Every start checks sizes and fingerprints
(milliseconds; the full SHA-256 of a 17 GB train.bin is `repro verify`'s minutes). Nothing here
imports the preparation side (datasets, pyarrow).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from repro.data import DataError
from repro.files import file_sha256, make_dir, new_partial, read_json, write_json

MANIFEST = "manifest.json"
# The authors' token files (A Generate_Indices.ipynb, docs/specification.md §5.2): only files of
# exactly these lengths give their batches from the fixed indices.
AUTHORS_TOKENS = {"train": 9_035_582_489, "val": 4_434_606}
GPT2_VOCAB = 50257  # token ids 0..50256, where a manifest does not give its tokenizer's n_vocab
SCAN_TOKENS = 1 << 26  # tokens read at a time when checking their values (128 MiB)


# The fingerprint: SHA-256 of the file's size and of FINGERPRINT_BLOCKS blocks of FINGERPRINT_BLOCK
# bytes spread evenly from its first byte to its last (the whole file when it is smaller).
FINGERPRINT_BLOCKS, FINGERPRINT_BLOCK = 64, 1 << 16


def fingerprint(path: str | os.PathLike) -> str:
    """A hash of a file's size and sampled blocks: catches a swapped file at a constant cost."""
    size = os.path.getsize(path)
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        if size <= FINGERPRINT_BLOCKS * FINGERPRINT_BLOCK:
            digest.update(f.read())
        else:
            last = size - FINGERPRINT_BLOCK
            for i in range(FINGERPRINT_BLOCKS):
                f.seek(i * last // (FINGERPRINT_BLOCKS - 1))
                digest.update(f.read(FINGERPRINT_BLOCK))
    return digest.hexdigest()


def write_token_files(
    data_dir: str | os.PathLike,
    splits: Mapping[str, np.ndarray | Iterable[np.ndarray]],
    *,
    documents: Mapping[str, int],
    source: dict,
    tokenizer: dict,
) -> dict:
    """Write each split's tokens and the manifest, the old one removed first: never a stale one."""
    data_dir = make_dir(data_dir)
    written = {}
    try:
        for name, pieces in splits.items():
            written[name] = _write_split(data_dir / f"{name}.bin", pieces, documents[name])
    except BaseException:
        for partial, _ in written.values():
            partial.unlink(missing_ok=True)
        raise
    manifest = {
        "source": source,
        "tokenizer": tokenizer,
        "splits": {name: entry for name, (_, entry) in written.items()},
    }
    manifest["authors_token_counts"] = is_authors_corpus(manifest)
    (data_dir / MANIFEST).unlink(missing_ok=True)
    for partial, entry in written.values():
        os.replace(partial, data_dir / entry["file"])
    write_json(data_dir / MANIFEST, manifest)
    return manifest


def _write_split(path: Path, pieces, documents: int) -> tuple[Path, dict]:
    """The tokens into a temporary file beside `path`; return it and the split's manifest entry."""
    partial, fd = new_partial(path)
    digest, tokens = hashlib.sha256(), 0
    try:
        with open(fd, "wb") as f:
            for piece in [pieces] if isinstance(pieces, np.ndarray) else pieces:
                if piece.dtype != np.uint16:  # a cast would wrap ids silently
                    raise TypeError(f"{path}: tokens of dtype {piece.dtype}, not uint16")
                f.write(piece)
                digest.update(piece)
                tokens += len(piece)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial, {
        "file": path.name,
        "documents": documents,
        "tokens": tokens,
        "sha256": digest.hexdigest(),
        "fingerprint": fingerprint(partial),
    }


def _verify_split(data_dir: Path, entry: dict, full: bool) -> None:
    path = data_dir / entry["file"]
    expected = 2 * entry["tokens"]
    try:
        actual = path.stat().st_size
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (listed in {MANIFEST})") from None
    if actual != expected:
        raise DataError(
            f"{path}: {actual:,} bytes, expected {expected:,} (2 x {entry['tokens']:,} "
            f"tokens in {MANIFEST}): truncated or not this manifest's file"
        )
    if not full and "fingerprint" in entry:
        if fingerprint(path) != entry["fingerprint"]:
            raise DataError(
                f"{path}: fingerprint differs from {MANIFEST}'s {entry['fingerprint']} "
                f"(sampled blocks changed): not this manifest's file"
            )
    # A manifest without fingerprints is checked by its SHA-256 alone.
    elif file_sha256(path) != entry["sha256"]:
        raise DataError(f"{path}: SHA-256 differs from {MANIFEST}'s {entry['sha256']}")


def read_manifest(data_dir: str | os.PathLike, verify: bool = True, full: bool = False) -> dict:
    """The manifest of a prepared directory; with verify, each split file's size and fingerprint."""
    data_dir = Path(data_dir)
    path = data_dir / MANIFEST
    manifest = read_json(path, DataError, "run `repro prepare` first")
    _check_manifest(path, manifest)
    if verify:
        for entry in manifest["splits"].values():
            _verify_split(data_dir, entry, full)
    return manifest


def _check_manifest(path: Path, manifest) -> None:
    """Refuse a manifest whose fields training reads are missing or of the wrong kind."""
    if not isinstance(manifest, dict):
        raise DataError(f"{path}: not a manifest (a JSON object is expected)")
    for field in ("source", "tokenizer", "splits"):
        if field not in manifest:
            raise DataError(f"{path}: missing field {field!r}")
    splits = manifest["splits"]
    if not isinstance(splits, dict) or not {"train", "val"} <= set(splits):
        raise DataError(f"{path}: splits: a 'train' and a 'val' entry are expected")
    for name, entry in splits.items():
        if not isinstance(entry, dict):
            raise DataError(f"{path}: splits.{name}: not an object")
        for field in ("file", "documents", "tokens", "sha256"):
            if field not in entry:
                raise DataError(f"{path}: missing field splits.{name}.{field}")
        for field in ("documents", "tokens"):
            value = entry[field]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DataError(f"{path}: splits.{name}.{field}: {value!r} is not a count")
        file = entry["file"]
        if not isinstance(file, str) or Path(file).name != file or file in ("", ".", ".."):
            raise DataError(
                f"{path}: splits.{name}.file: {file!r} is not a file name in {path.parent}"
            )
        if not isinstance(entry["sha256"], str):
            raise DataError(f"{path}: splits.{name}.sha256: {entry['sha256']!r} is not a hash")


def verify(data_dir: str | os.PathLike) -> dict:
    """Check every token file's size and full SHA-256 against the manifest; return it. Missing
    fingerprints are added with its mtime kept: Snakemake must not redraw the indices."""
    manifest = read_manifest(data_dir, full=True)
    check_token_values(data_dir, manifest)
    splits = manifest["splits"].values()
    if all("fingerprint" in entry for entry in splits):
        return manifest
    for entry in splits:
        entry["fingerprint"] = fingerprint(Path(data_dir) / entry["file"])
    path = Path(data_dir) / MANIFEST
    times = path.stat()
    write_json(path, manifest)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    return manifest


def token_memmap(data_dir: str | os.PathLike, manifest: dict, split: str) -> np.memmap:
    """A split's tokens, read-only uint16, as the manifest (read_manifest's) lists them."""
    if split not in manifest["splits"]:
        raise DataError(
            f"{Path(data_dir) / MANIFEST}: no split {split!r} "
            f"(splits: {', '.join(manifest['splits'])})"
        )
    entry = manifest["splits"][split]
    path = Path(data_dir) / entry["file"]
    try:
        tokens = np.memmap(path, dtype=np.uint16, mode="r")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (listed in {MANIFEST})") from None
    if len(tokens) != entry["tokens"]:
        raise DataError(f"{path}: {len(tokens):,} tokens, {MANIFEST} says {entry['tokens']:,}")
    return tokens


def check_token_values(
    data_dir: str | os.PathLike, manifest: dict, vocab_size: int | None = None
) -> None:
    """Refuse token files holding an id outside the vocabulary: training would fail hours in."""
    tokenizer = manifest["tokenizer"] if isinstance(manifest["tokenizer"], dict) else {}
    limit = tokenizer.get("n_vocab", GPT2_VOCAB)
    if vocab_size is not None:
        limit = min(limit, vocab_size)
    for split in manifest["splits"]:
        tokens = token_memmap(data_dir, manifest, split)
        for start in range(0, len(tokens), SCAN_TOKENS):
            chunk = tokens[start : start + SCAN_TOKENS]
            if chunk.max() >= limit:
                at = int(np.argmax(chunk >= limit))
                raise DataError(
                    f"{Path(data_dir) / manifest['splits'][split]['file']}: token {start + at:,} "
                    f"is {chunk[at]}, outside the vocabulary (0..{limit - 1})"
                )


def token_files(manifest: dict) -> dict:
    """What a split's tokens are, for the indices sidecar and run.json: count and SHA-256."""
    return {
        split: {
            "tokens": manifest["splits"][split]["tokens"],
            "sha256": manifest["splits"][split]["sha256"],
        }
        for split in ("train", "val")
    }


def is_authors_corpus(manifest: dict) -> bool:
    return all(
        manifest["splits"].get(split, {}).get("tokens") == n for split, n in AUTHORS_TOKENS.items()
    )


def corpus_note(manifest: dict) -> str:
    """One line: whether these token files are the authors' and so give their batches."""
    counts = {split: manifest["splits"][split]["tokens"] for split in AUTHORS_TOKENS}
    theirs = f"{AUTHORS_TOKENS['train']:,} train / {AUTHORS_TOKENS['val']:,} val"
    if is_authors_corpus(manifest):
        return f"token counts equal the authors' ({theirs}): the fixed indices give their batches"
    return (
        f"warning: token counts {counts['train']:,} train / {counts['val']:,} val are not "
        f"the authors' ({theirs}): the fixed indices select other sequences than theirs"
    )


@functools.cache
def token_byte_lengths() -> np.ndarray:
    """The UTF-8 bytes each GPT-2 token stands for, by token id. GPT-2's BPE is byte-level: each
    token stands for a fixed run of bytes, and a text's tokens add up to its bytes; the
    end-of-text separator between documents stands for none."""
    from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding

    encoding = gpt2_encoding()
    lengths = [len(encoding.decode_single_token_bytes(i)) for i in range(EOT_TOKEN)]
    return np.array([*lengths, 0])  # the separator: no text
