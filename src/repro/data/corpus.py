"""Where a corpus's documents come from (Source), the checks every source passes (free disk, the
document count), and local files (docs/data.md). `datasets` is imported only when a corpus is
loaded: the command line imports these modules' constants for its help.
"""

from __future__ import annotations

import glob
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from repro.data import DataError
from repro.files import free_bytes

# The split (nanoGPT's): the val share and the shuffle's seed.
TEST_SIZE = 0.0005
SPLIT_SEED = 2357
# Disk estimates of local text: GPT-2 BPE gives about 0.3 tokens per byte of English text (0.30
# measured on the python-docs corpus), so about 0.6 bytes of tokens per byte of text; the Arrow
# cache holds about one copy of the text; Parquet's compression is taken as at most 3x.
TOKEN_BYTES_PER_TEXT_BYTE = 2 * 0.3
PARQUET_EXPANSION = 3
BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".txt": "text"}


@dataclass(frozen=True)
class Source:
    """Where the documents come from: kind "files" (data_files globs), "hub" or "python-docs"."""

    kind: str
    data_files: tuple[str, ...] = ()
    hub_id: str | None = None
    revision: str | None = None
    cache_dir: str | None = None

    def describe(self) -> dict:
        if self.kind == "hub":
            return {"kind": "hub", "hub_id": self.hub_id, "revision": self.revision}
        described = {"kind": self.kind, "data_files": list(self.data_files)}
        if self.kind == "python-docs":
            described["python"] = platform.python_version()
        return described


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


def cache_dir(source: Source) -> Path:
    import datasets

    return Path(source.cache_dir or datasets.config.HF_DATASETS_CACHE)


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
    check_disk({cache_dir(source): text_bytes, out_dir: TOKEN_BYTES_PER_TEXT_BYTE * text_bytes})
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
    """Refuse text that is not UTF-8: the tokenizer would fail on it in a worker process."""
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
