"""Preparation: a corpus -> train.bin, val.bin and manifest.json (docs/specification.md §5).

The result is nanoGPT's (data/openwebtext/prepare.py) byte for byte. What differs is how: workers
each encode a contiguous range of documents from the memory-mapped Arrow table, and the main
process appends the ranges in order with a bounded number in flight, so memory does not grow with
the corpus.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from repro.data.corpus import SPLIT_SEED, TEST_SIZE, Source, check_documents, load_files
from repro.data.openwebtext import OWT_DOCUMENTS, hub_files, load_hub
from repro.data.python_docs import SMOKE_TEST_SIZE, python_docs_documents
from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding, tokenizer_identity
from repro.data.tokens import (
    DataError,
    corpus_note,
    write_token_files,
)
from repro.files import atomic_write, make_dir
from repro.runtime.signals import exit_with_parent

_EOT = np.array([EOT_TOKEN], dtype=np.uint32)  # the dtype tiktoken's buffers have
# A worker's task is a range of at most DOCS_PER_RANGE documents (about 9 MB of tokens for
# OpenWebText), read from Arrow DOCS_PER_BATCH at a time; small corpora get 4 ranges per worker.
DOCS_PER_RANGE = 4096
DOCS_PER_BATCH = 256


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


def split_corpus(dataset: datasets.Dataset, test_size: float) -> dict[str, datasets.Dataset]:
    """nanoGPT's split: datasets' own train_test_split, test renamed val (§5)."""
    try:
        parts = dataset.train_test_split(test_size=test_size, seed=SPLIT_SEED, shuffle=True)
    except ValueError as e:
        raise DataError(f"test_size {test_size}: {e}") from None
    return {"train": parts["train"], "val": parts["test"]}


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


def _set_worker_split(split: datasets.Dataset, parent: int) -> None:
    """Pool initializer: the split is sent once per worker (memory-mapped: a path, not the data);
    the worker ends when the preparing process dies, even by kill -9 (it would wait forever)."""
    global _worker_split
    exit_with_parent(parent)
    _worker_split = split


def worker_pool(workers: int, split: datasets.Dataset | None) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        workers, initializer=_set_worker_split, initargs=(split, os.getpid())
    )


def encode_range(start: int, stop: int) -> np.ndarray:
    """The tokens of documents [start, stop) of the worker's split (runs in a worker process)."""
    return np.concatenate(
        [
            encode_documents(_worker_split[i : min(i + DOCS_PER_BATCH, stop)]["text"])
            for i in range(start, stop, DOCS_PER_BATCH)
        ]
    )


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


def encoded_split(dataset: datasets.Dataset, name: str, workers: int) -> Iterator[np.ndarray]:
    """The tokens of `dataset`'s documents, a range at a time in order, encoded by `workers`."""
    ranges = document_ranges(len(dataset), workers)
    gpt2_encoding()  # built (about 1 s) once here: forked workers inherit it
    tokens = 0
    with (
        worker_pool(workers, dataset.select_columns("text")) as pool,
        tqdm(total=len(dataset), unit="doc", desc=name) as bar,
    ):
        results = ordered_results(pool, encode_range, ranges, 2 * workers)
        for (start, stop), ids in zip(ranges, results):
            yield ids
            tokens += len(ids)
            bar.update(stop - start)
            rate = tokens / max(bar.format_dict["elapsed"], 1e-9)
            bar.set_postfix_str(f"{tokens:,} tokens, {rate:,.0f} tokens/s")


def prepare(
    source: Source,
    out_dir: str | os.PathLike,
    *,
    expected_docs: int | None = OWT_DOCUMENTS,
    test_size: float = TEST_SIZE,
    num_proc: int | None = None,
) -> dict:
    out_dir, num_proc = Path(out_dir), num_proc or os.cpu_count()
    gpt2_encoding()  # refuse a bad tokenizer before any download
    dataset, described = load_corpus(source, out_dir, expected_docs, num_proc)
    splits = split_corpus(dataset, test_size)
    encoded = {name: encoded_split(part, f"{name}.bin", num_proc) for name, part in splits.items()}
    try:
        manifest = write_token_files(
            out_dir,
            encoded,
            documents={name: len(part) for name, part in splits.items()},
            source={**described, "test_size": test_size, "seed": SPLIT_SEED},
            tokenizer=tokenizer_identity(),
        )
    finally:  # the worker pool of a split left part-way ends now, not when collected
        for pieces in encoded.values():
            pieces.close()
    if source.kind != "python-docs":  # its last line: are these the authors' token files (§5.2)?
        print(corpus_note(manifest), flush=True)
    return manifest


def prepare_python_docs(
    out_dir: str | os.PathLike, *, test_size: float = SMOKE_TEST_SIZE, num_proc: int | None = None
) -> dict:
    """The smoke corpus, written as Parquet under out_dir/cache and prepared like any local file."""
    out_dir = Path(out_dir)
    documents = python_docs_documents(num_proc)
    corpus = out_dir / "cache" / "python-docs.parquet"
    make_dir(corpus.parent)
    with atomic_write(corpus, "wb") as f:
        pq.write_table(pa.table({"text": documents}), f)
    source = Source("python-docs", data_files=(str(corpus),), cache_dir=str(out_dir / "cache"))
    return prepare(
        source, out_dir, expected_docs=len(documents), test_size=test_size, num_proc=num_proc
    )
