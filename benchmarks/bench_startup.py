"""Start-up cost of a run at the paper's scale: the token-file checks of every `repro train` start.

Writes a sparse train.bin of the authors' 9,035,582,489 tokens (no disk used) and a small val.bin,
with the manifest `repro prepare` writes (sizes, fingerprints; the SHA-256s are placeholders that
only `repro verify` would read), then times what a start does: read the manifest, check each file's
size and fingerprint, map the tokens. With --full, also times the full SHA-256 check, which the
package did at every start before (minutes).

    python benchmarks/bench_startup.py [--dir /tmp/startup] [--full]
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import record

from repro.data.tokens import MANIFEST, fingerprint, read_manifest, token_memmap

PAPER_TRAIN_TOKENS, VAL_TOKENS = 9_035_582_489, 4_434_606


def write_sparse_data(data_dir: Path) -> None:
    splits = {}
    for split, tokens in (("train", PAPER_TRAIN_TOKENS), ("val", VAL_TOKENS)):
        path = data_dir / f"{split}.bin"
        with open(path, "wb") as f:
            f.truncate(2 * tokens)
        splits[split] = {
            "file": path.name,
            "documents": 0,
            "tokens": tokens,
            "sha256": "0" * 64,
            "fingerprint": fingerprint(path),
        }
    (data_dir / MANIFEST).write_text(
        json.dumps({"source": {"kind": "benchmark"}, "tokenizer": {}, "splits": splits})
    )


def start(data_dir: Path, full: bool) -> float:
    began = time.perf_counter()
    try:
        manifest = read_manifest(data_dir, full=full)
    except Exception as e:  # the placeholder SHA-256s differ: the time is what matters
        print(f"  ({e})")
        return time.perf_counter() - began
    for split in ("train", "val"):
        token_memmap(data_dir, manifest, split)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the sparse files go")
    parser.add_argument("--full", action="store_true", help="also time the full SHA-256 check")
    record.add_argument(parser)
    args = parser.parse_args()
    with record.recording(
        "startup", "A paper-scale run's start: the token files' checks", enabled=args.record
    ):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            data_dir = Path(tmp)
            write_sparse_data(data_dir)
            size = os.path.getsize(data_dir / "train.bin")
            print(f"train.bin: {size:,} bytes (sparse), {PAPER_TRAIN_TOKENS:,} tokens")
            print(f"start-up (size + fingerprint): {start(data_dir, full=False):.3f} s")
            if args.full:
                print(f"start-up (full SHA-256): {start(data_dir, full=True):.1f} s")


if __name__ == "__main__":
    main()
