"""Token files for training: a text corpus -> train.bin, val.bin and manifest.json (SPEC 5).

The preparation is nanoGPT's (data/openwebtext/prepare.py), with the same result byte for byte:
datasets' train_test_split(test_size=0.0005, seed=2357, shuffle=True), the test part renamed val,
each document encode_ordinary'd with the GPT-2 encoding and followed by the end-of-text token,
each split one flat uint16 file. What differs is how: worker processes each take a contiguous range
of the split's documents, read it themselves from the memory-mapped Arrow table and encode it with
tiktoken's encode_to_numpy (a buffer, no list of Python ints); the main process appends the ranges
to the file in order, with a bounded number in flight, so memory does not grow with the corpus.
Files are written under a .partial name and renamed only when complete.

Corpus sources, all read through datasets.load_dataset:
- local files (--data-files): parquet, json/jsonl or txt, with a `text` column (txt: one file,
  one document);
- a hub id (--hub-id, default OpenWebText): first its Parquet conversion (revision
  refs/convert/parquet; datasets 4+ refuses loading scripts), then the given revision; the
  document count decides whether a copy is complete;
- Python's own documentation (--python-docs): the smoke corpus, no download.
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import io
import json
import os
import platform
import shutil
import sysconfig
import tokenize
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from repro.tokenizer import EOT_TOKEN, gpt2_encoding, tokenizer_identity

OWT_HUB_ID = "Skylion007/openwebtext"
OWT_DOCUMENTS = 8_013_769
PARQUET_REVISION = "refs/convert/parquet"
TEST_SIZE = 0.0005
SPLIT_SEED = 2357
MANIFEST = "manifest.json"

# Disk estimates (SPEC 5): OpenWebText needs about 54 GB of datasets cache and 2 bytes per token
# for about 9.04e9 tokens. Local text: GPT-2 BPE gives about 0.3 tokens per byte of English text
# (0.30 measured on the python-docs corpus), so about 0.6 bytes of tokens per byte of text; the
# Arrow cache holds about one copy of the text; Parquet's compression is taken as at most 3x.
OWT_CACHE_BYTES = 54e9
OWT_TOKEN_BYTES = 2 * 9.04e9
TOKEN_BYTES_PER_TEXT_BYTE = 2 * 0.3
PARQUET_EXPANSION = 3
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".txt": "text"}

_EOT = np.array([EOT_TOKEN], dtype=np.uint32)  # the dtype tiktoken's buffers have
# A worker's task is a range of at most DOCS_PER_RANGE documents (about 9 MB of tokens for
# OpenWebText), read from Arrow DOCS_PER_BATCH at a time; small corpora get 4 ranges per worker.
DOCS_PER_RANGE = 4096
DOCS_PER_BATCH = 256

# The smoke corpus: which stdlib directories are not documentation, and its val share, chosen so
# that val has more than 50k tokens to draw the smoke preset's 64-token sequences from.
STDLIB_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages"}
SMOKE_TEST_SIZE = 0.05


class DataError(ValueError):
    """A corpus, token file or manifest that cannot be used; the message names the file or field."""


@dataclass(frozen=True)
class Source:
    """Where the documents come from: kind "files" (data_files globs), "hub" or "python-docs"."""
    kind: str
    data_files: tuple[str, ...] = ()
    hub_id: str = OWT_HUB_ID
    revision: str | None = None
    cache_dir: str | None = None

    def describe(self) -> dict:
        if self.kind == "hub":
            return {"kind": "hub", "hub_id": self.hub_id, "revision": self.revision}
        described = {"kind": self.kind, "data_files": list(self.data_files)}
        if self.kind == "python-docs":
            described["python"] = platform.python_version()
        return described


# ---- checks ----------------------------------------------------------------------------------

def free_bytes(path: Path) -> int:
    """Free space on the file system holding `path` (tests replace this to simulate a full disk)."""
    return shutil.disk_usage(path).free


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


def check_disk(needs: dict[Path, float]) -> None:
    """Refuse if any file system lacks the bytes the paths on it need (paths need not exist yet)."""
    by_device: dict[int, list] = {}
    for path, n in needs.items():
        existing = _existing_ancestor(Path(path))
        by_device.setdefault(existing.stat().st_dev, [existing, 0.0])[1] += n
    for existing, n in by_device.values():
        free = free_bytes(existing)
        if free < n:
            raise DataError(f"{existing}: {free / 1e9:.2f} GB free, preparing needs about "
                            f"{n / 1e9:.2f} GB (cache and token files); free space or choose "
                            f"--out / --cache-dir elsewhere")


def check_documents(found: int, expected: int | None, where: str) -> None:
    if expected is not None and found != expected:
        raise DataError(f"{where}: {found:,} documents, expected {expected:,} "
                        f"(pass --expected-docs {found} if this is the corpus you mean)")


def _cache_dir(source: Source) -> Path:
    return Path(source.cache_dir or datasets.config.HF_DATASETS_CACHE)


# ---- loading ---------------------------------------------------------------------------------

def expand_data_files(patterns) -> list[Path]:
    files = []
    for pattern in patterns:
        matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
        if not matches:
            raise DataError(f"{pattern}: no such file (--data-files)")
        files += matches
    return files


def _builder(files: list[Path]) -> str:
    for f in files:
        if f.suffix not in BUILDERS:
            raise DataError(f"{f}: unsupported file type {f.suffix!r} "
                            f"(use {', '.join(sorted(BUILDERS))})")
    builders = {BUILDERS[f.suffix] for f in files}
    if len(builders) > 1:
        raise DataError(f"--data-files: mixes file types ({', '.join(sorted(builders))})")
    return builders.pop()


def load_files(source: Source, out_dir: Path, num_proc: int) -> datasets.Dataset:
    files = expand_data_files(source.data_files)
    builder = _builder(files)
    expansion = PARQUET_EXPANSION if builder == "parquet" else 1
    text_bytes = expansion * sum(f.stat().st_size for f in files)
    check_disk({_cache_dir(source): text_bytes, out_dir: TOKEN_BYTES_PER_TEXT_BYTE * text_bytes})
    options = {"sample_by": "document"} if builder == "text" else {}
    dataset = datasets.load_dataset(builder, data_files=[str(f) for f in files], split="train",
                                    cache_dir=source.cache_dir,
                                    num_proc=min(num_proc, len(files)) if len(files) > 1 else None,
                                    **options)
    if "text" not in dataset.column_names:
        raise DataError(f"{files[0]}: no 'text' column (columns: {', '.join(dataset.column_names)})")
    return dataset


def load_hub(source: Source, out_dir: Path, expected_docs: int | None, num_proc: int):
    """The first complete copy of the hub dataset, and the revision it came from."""
    scale = (expected_docs or OWT_DOCUMENTS) / OWT_DOCUMENTS
    check_disk({_cache_dir(source): OWT_CACHE_BYTES * scale, out_dir: OWT_TOKEN_BYTES * scale})
    tried = []
    for revision in dict.fromkeys([PARQUET_REVISION, source.revision]):
        try:
            dataset = datasets.load_dataset(source.hub_id, revision=revision, split="train",
                                            cache_dir=source.cache_dir, num_proc=num_proc)
        except Exception as e:  # offline, no such revision, a refused loading script: try the next
            reason = (str(e) or type(e).__name__).splitlines()[0]
            tried.append(f"revision {revision or 'default'}: {reason}")
            continue
        if expected_docs is None or len(dataset) == expected_docs:
            return dataset, revision
        tried.append(f"revision {revision or 'default'}: {len(dataset):,} documents, "
                     f"expected {expected_docs:,}")
    raise DataError(f"{source.hub_id}: no complete copy ({'; '.join(tried)}); download the full "
                    f"corpus as parquet/jsonl/txt files and pass them with --data-files GLOB")


def load_corpus(source: Source, out_dir: Path, expected_docs: int | None, num_proc: int):
    """The whole corpus as one Dataset with a text column, and the manifest's source entry."""
    described = source.describe()
    if source.kind == "hub":
        dataset, described["revision"] = load_hub(source, out_dir, expected_docs, num_proc)
    else:
        dataset = load_files(source, out_dir, num_proc)
        check_documents(len(dataset), expected_docs, ", ".join(source.data_files))
    return dataset, described


def split_corpus(dataset: datasets.Dataset, test_size: float) -> dict[str, datasets.Dataset]:
    """nanoGPT's split: datasets' own train_test_split, test renamed val (SPEC 5)."""
    try:
        parts = dataset.train_test_split(test_size=test_size, seed=SPLIT_SEED, shuffle=True)
    except ValueError as e:
        raise DataError(f"test_size {test_size}: {e}") from None
    return {"train": parts["train"], "val": parts["test"]}


# ---- tokenizing and writing ------------------------------------------------------------------

def encode_documents(texts: list[str]) -> np.ndarray:
    """encode_ordinary(text) + [EOT] for each document, concatenated, as uint16."""
    enc = gpt2_encoding()
    pieces = []
    for text in texts:
        # encode with no special token allowed or disallowed is encode_ordinary (tiktoken's
        # docstring); encode_to_numpy returns it as one buffer instead of a list of Python ints.
        pieces += [enc.encode_to_numpy(text, disallowed_special=()), _EOT]
    return np.concatenate(pieces, dtype=np.uint16) if pieces else np.empty(0, np.uint16)


_worker_split: datasets.Dataset | None = None


def _set_worker_split(split: datasets.Dataset) -> None:
    """Pool initializer: the split is sent once per worker (memory-mapped: a path, not the data)."""
    global _worker_split
    _worker_split = split


def encode_range(start: int, stop: int) -> np.ndarray:
    """The tokens of documents [start, stop) of the worker's split (runs in a worker process)."""
    return np.concatenate([
        encode_documents(_worker_split[i:min(i + DOCS_PER_BATCH, stop)]["text"])
        for i in range(start, stop, DOCS_PER_BATCH)])


def ordered_results(pool, fn, arguments, in_flight: int):
    """fn(*args) for each args on the pool, yielded in order, at most `in_flight` at a time."""
    pending = deque()
    for args in arguments:
        pending.append(pool.submit(fn, *args))
        if len(pending) >= in_flight:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def document_ranges(n_documents: int, workers: int) -> list[tuple[int, int]]:
    size = max(1, min(DOCS_PER_RANGE, -(-n_documents // (4 * workers))))
    return [(start, min(start + size, n_documents)) for start in range(0, n_documents, size)]


def append_tokens(f, digest, ids: np.ndarray) -> None:
    f.write(ids)
    digest.update(ids)


def write_split(dataset: datasets.Dataset, path: Path, workers: int) -> tuple[Path, dict]:
    """Tokenize `dataset` into path.partial; return it and the split's manifest entry."""
    partial = path.with_name(path.name + ".partial")
    digest, tokens = hashlib.sha256(), 0
    ranges = document_ranges(len(dataset), workers)
    gpt2_encoding()  # built (about 1 s) once here: forked workers inherit it
    try:
        with ProcessPoolExecutor(workers, initializer=_set_worker_split,
                                 initargs=(dataset.select_columns("text"),)) as pool, \
                open(partial, "wb") as f, tqdm(total=len(dataset), unit="doc", desc=path.name) as bar:
            results = ordered_results(pool, encode_range, ranges, 2 * workers)
            for (start, stop), ids in zip(ranges, results):
                append_tokens(f, digest, ids)
                tokens += len(ids)
                bar.update(stop - start)
                bar.set_postfix_str(f"{tokens:,} tokens, "
                                    f"{tokens / max(bar.format_dict['elapsed'], 1e-9):,.0f} tokens/s")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return partial, {"file": path.name, "documents": len(dataset), "tokens": tokens,
                     "sha256": digest.hexdigest()}


def _write_json(path: Path, data: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


def prepare(source: Source, out_dir: str | os.PathLike, *, expected_docs: int | None = OWT_DOCUMENTS,
            test_size: float = TEST_SIZE, num_proc: int | None = None) -> dict:
    """Prepare train.bin, val.bin and manifest.json in out_dir from `source`; return the manifest."""
    out_dir, num_proc = Path(out_dir), num_proc or os.cpu_count()
    gpt2_encoding()  # refuse a bad tokenizer before any download
    dataset, described = load_corpus(source, out_dir, expected_docs, num_proc)
    splits = split_corpus(dataset, test_size)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    try:
        for name, part in splits.items():
            written.append(write_split(part, out_dir / f"{name}.bin", num_proc))
    except BaseException:
        for partial, _ in written:
            partial.unlink(missing_ok=True)
        raise
    manifest = {"source": {**described, "test_size": test_size, "seed": SPLIT_SEED},
                "tokenizer": tokenizer_identity(),
                "splits": {name: entry for name, (_, entry) in zip(splits, written)}}
    # A crash between here and the new manifest leaves no manifest, never a stale one.
    (out_dir / MANIFEST).unlink(missing_ok=True)
    for partial, entry in written:
        os.replace(partial, out_dir / entry["file"])
    _write_json(out_dir / MANIFEST, manifest)
    return manifest


# ---- reading ---------------------------------------------------------------------------------

def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


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
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: no such file (run `repro prepare` first)") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e})") from None
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


def token_memmap(data_dir: str | os.PathLike, split: str) -> np.memmap:
    """A split's tokens, read-only uint16, as the manifest lists them."""
    manifest = read_manifest(data_dir, verify=False)
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


# ---- the smoke corpus: Python's own documentation --------------------------------------------

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def stdlib_sources() -> list[Path]:
    """The standard library's .py files outside test, idlelib and site-packages, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = (p for p in root.rglob("*.py")
             if not STDLIB_SKIP_DIRS & set(p.relative_to(root).parts[:-1]))
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def module_documents(path: Path) -> list[str]:
    """A module's docstrings (module, classes, functions; one document each), then its comments.

    Parsed, never imported. The comments (one document per module) are there because the
    docstrings and topics alone are about 0.6M tokens, short of the smoke corpus's 1M.
    """
    source = path.read_bytes()
    try:
        tree = ast.parse(source)
        comments = [t.string.lstrip("#").strip()
                    for t in tokenize.tokenize(io.BytesIO(source).readline)
                    if t.type == tokenize.COMMENT]
    except (SyntaxError, ValueError, tokenize.TokenError):
        return []  # not Python this interpreter parses (none in CPython 3.11's stdlib)
    docstrings = [ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, _DOCUMENTED)]
    comment_text = "\n".join(c for c in comments if c)
    return [d for d in docstrings if d] + ([comment_text] if comment_text else [])


def python_docs_documents(num_proc: int | None = None) -> list[str]:
    """pydoc's topics (sorted by key), then the stdlib's documents; fixed for a Python version."""
    from pydoc_data.topics import topics
    with ProcessPoolExecutor(num_proc or os.cpu_count()) as pool:
        per_module = pool.map(module_documents, stdlib_sources(), chunksize=16)
        return [text for _, text in sorted(topics.items())] + [d for docs in per_module for d in docs]


def prepare_python_docs(out_dir: str | os.PathLike, *, test_size: float = SMOKE_TEST_SIZE,
                        num_proc: int | None = None) -> dict:
    """The smoke corpus, written as Parquet under out_dir/cache and prepared like any local file."""
    out_dir = Path(out_dir)
    documents = python_docs_documents(num_proc)
    corpus = out_dir / "cache" / "python-docs.parquet"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": documents}), corpus)
    source = Source("python-docs", data_files=(str(corpus),), cache_dir=str(out_dir / "cache"))
    return prepare(source, out_dir, expected_docs=len(documents), test_size=test_size,
                   num_proc=num_proc)


# ---- command line ----------------------------------------------------------------------------

def add_prepare_arguments(parser: argparse.ArgumentParser) -> None:
    corpus = parser.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--data-files", nargs="+", metavar="GLOB",
                        help="local parquet/json/jsonl/txt files with a 'text' column")
    corpus.add_argument("--hub-id", metavar="ID",
                        help=f"a Hugging Face dataset (OpenWebText: {OWT_HUB_ID})")
    corpus.add_argument("--python-docs", action="store_true",
                        help="the smoke corpus: Python's own documentation, no download")
    parser.add_argument("--out", required=True, metavar="DIR", help="where train.bin, val.bin go")
    parser.add_argument("--revision", help="hub revision tried after refs/convert/parquet")
    parser.add_argument("--cache-dir", metavar="DIR", help="datasets cache (default: HF's)")
    parser.add_argument("--expected-docs", type=int, metavar="N",
                        help=f"document count to insist on (default {OWT_DOCUMENTS:,}, OpenWebText's)")
    parser.add_argument("--test-size", type=float, metavar="F",
                        help=f"val share (default {TEST_SIZE}; --python-docs: {SMOKE_TEST_SIZE})")
    parser.add_argument("--num-proc", type=int, metavar="N",
                        help="worker processes (default: all cores)")


def _source_from_args(args: argparse.Namespace) -> Source:
    if args.revision is not None and args.hub_id is None:
        raise DataError("--revision: applies only to --hub-id")
    if args.hub_id is not None:
        return Source("hub", hub_id=args.hub_id, revision=args.revision, cache_dir=args.cache_dir)
    return Source("files", data_files=tuple(args.data_files), cache_dir=args.cache_dir)


def prepare_command(args: argparse.Namespace) -> None:
    """`repro prepare`: print where the token files are and how many tokens each split has."""
    if args.python_docs:
        for flag in ("revision", "cache_dir", "expected_docs"):
            if getattr(args, flag) is not None:
                raise DataError(f"--{flag.replace('_', '-')}: does not apply to --python-docs")
        test_size = SMOKE_TEST_SIZE if args.test_size is None else args.test_size
        manifest = prepare_python_docs(args.out, num_proc=args.num_proc, test_size=test_size)
    else:
        expected = OWT_DOCUMENTS if args.expected_docs is None else args.expected_docs
        test_size = TEST_SIZE if args.test_size is None else args.test_size
        manifest = prepare(_source_from_args(args), args.out, expected_docs=expected,
                           test_size=test_size, num_proc=args.num_proc)
    for name, entry in manifest["splits"].items():
        print(f"{Path(args.out) / entry['file']}: {entry['documents']:,} documents, "
              f"{entry['tokens']:,} tokens")
