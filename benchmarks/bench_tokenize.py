"""Tokenize-and-write throughput: nanoGPT's prepare.py approach against repro.data, same sample.

    PYTHONPATH=src python benchmarks/bench_tokenize.py --sizes-mb 25 100

The sample is the python-docs smoke corpus joined into documents of about OpenWebText's mean
length (~1,100 tokens) and repeated up to each size, as one Parquet file. Each run is a fresh
subprocess with a fresh datasets cache (datasets.map would otherwise return its cached result);
loading and splitting are not timed (a prior subprocess builds the cache), tokenizing and writing
train.bin / val.bin are. The methods run interleaved, --repeat times each; the fastest run of each
counts (the machine may be shared). All runs must produce byte-identical files.
Memory, over the timed part only: the peak RSS of the run's process (VmHWM, reset when timing
starts), ru_maxrss of its largest child (the workers), and the peak anonymous RSS of the process
(sampled; file-backed pages of the memory-mapped Arrow cache count in RSS but are the kernel's
to drop). Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import record

from repro.data import corpus, prepare, python_docs
from repro.data.tokenizer import gpt2_encoding, tokenizer_identity
from repro.data.tokens import write_token_files
from repro.files import file_sha256

# About OpenWebText's 1,128 tokens per document (docs/specification.md §5: 9.04e9 / 8.01e6).
DOC_CHARS = 4_500


def owt_sized_documents() -> list[str]:
    docs, current = [], ""
    for text in python_docs.python_docs_documents():
        current += text + "\n\n"
        if len(current) >= DOC_CHARS:
            docs.append(current)
            current = ""
    return docs


def build_sample(path: Path, docs: list[str], megabytes: float) -> None:
    size = sum(len(d.encode()) for d in docs)
    pq.write_table(pa.table({"text": docs * max(1, round(megabytes * 1e6 / size))}), path)


def nanogpt(splits: dict, out: Path, num_proc: int) -> None:
    """data/openwebtext/prepare.py's map and write, shard count capped by the split's size."""
    enc = gpt2_encoding()

    def process(example):
        ids = enc.encode_ordinary(example["text"])
        ids.append(enc.eot_token)
        return {"ids": ids, "len": len(ids)}

    tokenized = datasets.DatasetDict(splits).map(
        process, remove_columns=["text"], desc="tokenizing the splits", num_proc=num_proc
    )
    for split, dset in tokenized.items():
        arr_len = np.sum(dset["len"], dtype=np.uint64)
        arr = np.memmap(out / f"{split}.bin", dtype=np.uint16, mode="w+", shape=(arr_len,))
        total_batches = min(1024, len(dset))
        idx = 0
        for batch_idx in range(total_batches):
            batch = dset.shard(
                num_shards=total_batches, index=batch_idx, contiguous=True
            ).with_format("numpy")
            arr_batch = np.concatenate(batch["ids"])
            arr[idx : idx + len(arr_batch)] = arr_batch
            idx += len(arr_batch)
        arr.flush()


def ours(splits: dict, out: Path, num_proc: int) -> None:
    write_token_files(
        out,
        {
            name: prepare.encoded_split(dset, f"{name}.bin", num_proc)
            for name, dset in splits.items()
        },
        documents={name: len(dset) for name, dset in splits.items()},
        source={"kind": "benchmark"},
        tokenizer=tokenizer_identity(),
    )


def _status_kb(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _anon_rss_sampler(peak: list) -> None:
    while True:
        peak[0] = max(peak[0], _status_kb("RssAnon"))
        time.sleep(0.02)


def _cpu_seconds() -> float:
    """User + system time of this process and its finished children (the workers)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def load_splits(sample: Path, out: Path) -> dict:
    """The sample's splits; the first call (its own subprocess) builds datasets' cache, later
    calls memory-map it, so that the timed runs start from the same, small footprint."""
    dataset = datasets.load_dataset(
        "parquet", data_files=str(sample), split="train", cache_dir=str(out / "cache")
    )
    return prepare.split_corpus(dataset, corpus.TEST_SIZE)


def run_one(method: str, sample: Path, out: Path, num_proc: int) -> dict:
    splits = load_splits(sample, out)
    if method == "load":
        return {}
    # Memory is measured over the timed part only: reset the peak RSS (VmHWM; proc(5) clear_refs).
    Path("/proc/self/clear_refs").write_text("5")
    peak = [0]
    threading.Thread(target=_anon_rss_sampler, args=(peak,), daemon=True).start()
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    {"nanogpt": nanogpt, "ours": ours}[method](splits, out, num_proc)
    seconds, cpu_seconds = time.perf_counter() - start, _cpu_seconds() - cpu_start
    tokens = sum(os.path.getsize(out / f"{s}.bin") // 2 for s in splits)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "tokens": tokens,
        "maxrss_mb": _status_kb("VmHWM") / 1024,
        "child_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "anon_rss_mb": peak[0] / 1024,
        "sha256": {s: file_sha256(out / f"{s}.bin") for s in splits},
    }


def _subprocess(method: str, sample: Path, out: Path, num_proc: int) -> dict:
    result = subprocess.run(
        [
            sys.executable,
            __file__,
            "--run",
            method,
            "--sample",
            str(sample),
            "--out",
            str(out),
            "--num-proc",
            str(num_proc),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout.splitlines()[-1])


def measure(method: str, sample: Path, workdir: Path, num_proc: int) -> dict:
    """One timed run in a fresh subprocess, with a fresh datasets cache built beforehand."""
    out = Path(tempfile.mkdtemp(prefix=method, dir=workdir))
    _subprocess("load", sample, out, num_proc)
    return _subprocess(method, sample, out, num_proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[25, 100])
    parser.add_argument("--num-proc", type=int, default=os.cpu_count())
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2, help="runs per method; the fastest counts")
    parser.add_argument("--run", choices=["load", "nanogpt", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--sample", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    record.add_argument(parser)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_one(args.run, args.sample, args.out, args.num_proc)))
        return
    with record.recording(
        "tokenize",
        "Tokenizing and writing a corpus: nanoGPT's prepare.py against repro.data",
        enabled=args.record,
    ):
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_tokenize"))
        workdir.mkdir(parents=True, exist_ok=True)
        docs = owt_sized_documents()
        print(
            f"{args.num_proc} worker processes; sample, method, tokens, wall s, tokens/s, CPU s, "
            f"peak RSS MB (process / largest worker), peak anonymous RSS MB (process)"
        )
        for megabytes in args.sizes_mb:
            sample = workdir / f"sample-{megabytes:g}MB.parquet"
            build_sample(sample, docs, megabytes)
            sample_mb = pq.read_table(sample)["text"].nbytes / 1e6  # text bytes, not compressed
            runs = [
                (m, measure(m, sample, workdir, args.num_proc))
                for _ in range(args.repeat)
                for m in ("nanogpt", "ours")
            ]  # interleaved
            results = {
                m: min((r for name, r in runs if name == m), key=lambda r: r["seconds"])
                for m in ("nanogpt", "ours")
            }
            assert all(r["sha256"] == results["ours"]["sha256"] for _, r in runs), "outputs differ"
            for method, r in results.items():
                print(
                    f"{sample_mb:6.1f} MB  {method:8s} {r['tokens']:>11,} {r['seconds']:7.2f} s "
                    f"{r['tokens'] / r['seconds']:>11,.0f} tok/s {r['cpu_seconds']:7.2f} s  "
                    f"{r['maxrss_mb']:6.0f} / "
                    f"{r['child_maxrss_mb']:4.0f}  {r['anon_rss_mb']:6.0f}"
                )
            speedup, cpu = (
                results["nanogpt"][k] / results["ours"][k] for k in ("seconds", "cpu_seconds")
            )
            print(
                f"{sample_mb:6.1f} MB  ratio ours / nanoGPT: tokens/s {speedup:.2f}x, "
                f"tokens per CPU second {cpu:.2f}x (identical output)"
            )


if __name__ == "__main__":
    main()
