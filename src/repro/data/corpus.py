"""Where a corpus's documents come from: one datasets.Dataset with a `text` column.

docs/specification.md §5 says which corpus and split the paper uses.

Corpus sources, all read through datasets.load_dataset:
- local files (--data-files): parquet, json/jsonl or txt, with a `text` column (txt: one file,
  one document);
- a hub id (--hub-id, default OpenWebText): first the given revision (default: the default
  branch, where the authors' datasets 3.6 found 80 Parquet files), then the Parquet conversion
  (refs/convert/parquet); the document count decides whether a copy is complete, and the
  manifest records the commit and the data files datasets resolved;
- Python's own documentation (--python-docs): the smoke corpus, no download.
Before anything is read, the free space for the datasets cache and the token files is checked.
`datasets` is imported only when a corpus is loaded: the command line imports this module's
constants for its help.
"""

from __future__ import annotations

import ast
import glob
import io
import os
import platform
import re
import sysconfig
import tokenize
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from repro.data.tokens import DataError
from repro.files import free_bytes
from repro.parent import exit_with_parent

OWT_HUB_ID = "Skylion007/openwebtext"
OWT_DOCUMENTS = 8_013_769
PARQUET_REVISION = "refs/convert/parquet"
# The split (nanoGPT's): the val share and the shuffle's seed; the smoke corpus's val share is
# chosen so that val has more than 50k tokens to draw the smoke preset's 64-token sequences from.
TEST_SIZE = 0.0005
SPLIT_SEED = 2357
SMOKE_TEST_SIZE = 0.05
# Disk estimates (§5): OpenWebText needs about 54 GB of datasets cache and 2 bytes per token
# for about 9.04e9 tokens. Local text: GPT-2 BPE gives about 0.3 tokens per byte of English text
# (0.30 measured on the python-docs corpus), so about 0.6 bytes of tokens per byte of text; the
# Arrow cache holds about one copy of the text; Parquet's compression is taken as at most 3x.
OWT_CACHE_BYTES = 54e9
OWT_TOKEN_BYTES = 2 * 9.04e9
TOKEN_BYTES_PER_TEXT_BYTE = 2 * 0.3
PARQUET_EXPANSION = 3
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".txt": "text"}

# The smoke corpus: the stdlib directories that are not documentation.
STDLIB_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages"}


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
            raise DataError(
                f"{existing}: {free / 1e9:.2f} GB free, preparing needs about "
                f"{n / 1e9:.2f} GB (cache and token files); free space or choose "
                f"--out / --cache-dir elsewhere"
            )


def check_documents(found: int, expected: int | None, where: str) -> None:
    if expected is not None and found != expected:
        raise DataError(
            f"{where}: {found:,} documents, expected {expected:,} "
            f"(pass --expected-docs {found} if this is the corpus you mean)"
        )


def _cache_dir(source: Source) -> Path:
    import datasets

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
            raise DataError(
                f"{f}: unsupported file type {f.suffix!r} (use {', '.join(sorted(BUILDERS))})"
            )
    builders = {BUILDERS[f.suffix] for f in files}
    if len(builders) > 1:
        raise DataError(f"--data-files: mixes file types ({', '.join(sorted(builders))})")
    return builders.pop()


def load_files(source: Source, out_dir: Path, num_proc: int):
    import datasets

    files = expand_data_files(source.data_files)
    builder = _builder(files)
    expansion = PARQUET_EXPANSION if builder == "parquet" else 1
    text_bytes = expansion * sum(f.stat().st_size for f in files)
    check_disk({_cache_dir(source): text_bytes, out_dir: TOKEN_BYTES_PER_TEXT_BYTE * text_bytes})
    for f in files:
        if f.stat().st_size == 0:
            raise DataError(f"{f}: empty file, no documents")
    options = {"sample_by": "document"} if builder == "text" else {}
    try:
        dataset = datasets.load_dataset(
            builder,
            data_files=[str(f) for f in files],
            split="train",
            cache_dir=source.cache_dir,
            num_proc=min(num_proc, len(files)) if len(files) > 1 else None,
            **options,
        )
    except Exception as e:  # datasets wraps what went wrong (bytes that are not UTF-8, a corrupt
        # Parquet file, an empty JSON Lines file...): name the files and the innermost reason
        raise DataError(
            f"{', '.join(source.data_files)}: cannot be read as {builder} ({root_cause(e)})"
        ) from None
    check_text_column(dataset, files)
    return dataset


def root_cause(error: BaseException) -> str:
    while error.__cause__ or error.__context__:
        error = error.__cause__ or error.__context__
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def check_text_column(dataset, files: list[Path]) -> None:
    """A non-empty `text` column of strings, none of them null."""
    where = files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more"
    if "text" not in dataset.column_names:
        columns = ", ".join(dataset.column_names)
        raise DataError(f"{where}: no 'text' column (columns: {columns})")
    kind = dataset.features["text"]
    if getattr(kind, "dtype", None) not in ("string", "large_string"):
        raise DataError(f"{where}: the 'text' column holds {kind}, not strings")
    if len(dataset) == 0:
        raise DataError(f"{where}: no documents")
    nulls = dataset.data.column("text").null_count
    if nulls:
        raise DataError(f"{where}: {nulls:,} documents have no text (null)")
    # In one JSON Lines file, document n is line n (blank lines aside)
    unit = "line" if len(files) == 1 and files[0].suffix in (".jsonl", ".json") else "document"
    check_utf8(dataset.data.column("text"), where, unit)


def check_utf8(column, where, unit: str) -> None:
    """Refuse text that is not UTF-8: Arrow's JSON reader keeps such bytes, and the tokenizer
    would fail on them in a worker process."""
    import pyarrow as pa

    offset = 0
    for chunk in column.chunks:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid as e:
            found = re.search(r"string index (\d+)", str(e))
            at = f", {unit} {offset + int(found.group(1)) + 1:,}" if found else ""
            raise DataError(f"{where}{at}: text with bytes that are not UTF-8") from None
        offset += len(chunk)


def load_hub(source: Source, out_dir: Path, expected_docs: int | None, num_proc: int):
    """The first complete copy of the hub dataset, and the revision it came from."""
    import datasets

    scale = (expected_docs or OWT_DOCUMENTS) / OWT_DOCUMENTS
    check_disk({_cache_dir(source): OWT_CACHE_BYTES * scale, out_dir: OWT_TOKEN_BYTES * scale})
    tried = []
    for revision in dict.fromkeys([source.revision, PARQUET_REVISION]):
        try:
            dataset = datasets.load_dataset(
                source.hub_id,
                revision=revision,
                split="train",
                cache_dir=source.cache_dir,
                num_proc=num_proc,
            )
        except Exception as e:  # offline, no such revision, a refused loading script: try the next
            reason = (str(e) or type(e).__name__).splitlines()[0]
            tried.append(f"revision {revision or 'default'}: {reason}")
            continue
        if expected_docs is None or len(dataset) == expected_docs:
            return dataset, revision
        tried.append(
            f"revision {revision or 'default'}: {len(dataset):,} documents, "
            f"expected {expected_docs:,}"
        )
    raise DataError(
        f"{source.hub_id}: no complete copy ({'; '.join(tried)}); download the full "
        f"corpus as parquet/jsonl/txt files and pass them with --data-files GLOB"
    )


def hub_files(source: Source, revision: str | None) -> dict:
    """The commit and the train data files, in order, that datasets resolves for a hub revision
    (paths hf://datasets/ID@COMMIT/...); empty where datasets cannot say (a loading script)."""
    import datasets

    try:
        builder = datasets.load_dataset_builder(
            source.hub_id, revision=revision, cache_dir=source.cache_dir
        )
        files = [str(f) for f in builder.config.data_files["train"]]
    except Exception:  # offline, a script dataset (no data_files): the manifest says less
        return {}
    commits = {m.group(1) for f in files if (m := re.search(r"@([0-9a-f]{40})/", f))}
    return {"commit": commits.pop() if len(commits) == 1 else None, "data_files": files}


def load_corpus(source: Source, out_dir: Path, expected_docs: int | None, num_proc: int):
    """The whole corpus as one Dataset with a text column, and the manifest's source entry."""
    described = source.describe()
    if source.kind == "hub":
        dataset, described["revision"] = load_hub(source, out_dir, expected_docs, num_proc)
        described |= hub_files(source, described["revision"])
    else:
        dataset = load_files(source, out_dir, num_proc)
        check_documents(len(dataset), expected_docs, ", ".join(source.data_files))
    return dataset, described


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def stdlib_sources() -> list[Path]:
    """The standard library's .py files outside test, idlelib and site-packages, sorted."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = (
        p for p in root.rglob("*.py") if not STDLIB_SKIP_DIRS & set(p.relative_to(root).parts[:-1])
    )
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def module_documents(path: Path) -> list[str]:
    """A module's docstrings (module, classes, functions; one document each), then its comments.

    Parsed, never imported. The comments (one document per module) are there because the
    docstrings and topics alone are about 0.6M tokens, short of the smoke corpus's 1M.
    """
    source = path.read_bytes()
    try:
        tree = ast.parse(source)
        comments = [
            t.string.lstrip("#").strip()
            for t in tokenize.tokenize(io.BytesIO(source).readline)
            if t.type == tokenize.COMMENT
        ]
    except (SyntaxError, ValueError, tokenize.TokenError):
        return []  # not Python this interpreter parses (none in CPython 3.11's stdlib)
    docstrings = [
        ast.get_docstring(node) for node in ast.walk(tree) if isinstance(node, _DOCUMENTED)
    ]
    comment_text = "\n".join(c for c in comments if c)
    return [d for d in docstrings if d] + ([comment_text] if comment_text else [])


def python_docs_documents(num_proc: int | None = None) -> list[str]:
    """pydoc's topics (sorted by key), then the stdlib's documents; fixed for a Python version."""
    from pydoc_data.topics import topics

    with ProcessPoolExecutor(
        num_proc or os.cpu_count(), initializer=exit_with_parent, initargs=(os.getpid(),)
    ) as pool:
        per_module = pool.map(module_documents, stdlib_sources(), chunksize=16)
        documents = [d for docs in per_module for d in docs]
        return [text for _, text in sorted(topics.items())] + documents
