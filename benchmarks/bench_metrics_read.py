"""Wall time of reading a long metrics.csv: the analysis's reader (repro.analysis.runs.read_metrics,
pandas) and `repro status`'s (repro.rundir.read_rows, plain Python).

Writes a metrics.csv of ROWS steps with the package's writer (1,120,000 rows: about 115 MB, an
evaluation every 100 steps), then reads it in a process of its own, REPEATS times, alternating
with the same read by another checkout where --against names one (its src/ first on the path),
so that both meet the same load. Prints the median seconds of each, and the ratio.

    python benchmarks/bench_metrics_read.py [--rows 1120000] [--repeats 3] [--against CHECKOUT]
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import record
from side_by_side import REPO, add_arguments, print_side_by_side

READERS = {
    "read_metrics (analysis)": "from repro.analysis.runs import read_metrics as read",
    "read_rows (repro status)": "from repro.rundir import read_rows as read",
}
TIMED = """{}
import sys, time
t = time.perf_counter()
read(sys.argv[1])
print(time.perf_counter() - t)"""


def write(path: Path, rows: int) -> None:
    """A run's metrics.csv as training writes it: random losses, an evaluation each 100 steps."""
    sys.path.insert(0, str(REPO / "src"))
    from repro.rundir import write_metrics

    rng = random.Random(0)

    def row(step):
        evaluated = step % 100 == 0
        losses = ("eval_train_loss", "eval_val_loss")
        evals = {k: rng.random() + 3 if evaluated else None for k in losses}
        stds = {k: rng.random() if evaluated else None for k in ("eval_train_std", "eval_val_std")}
        speed = {"step_time_s": rng.random(), "tokens_per_s": 65536 / (0.1 + rng.random())}
        train = {"lr": 6e-4 * rng.random(), "train_loss": 3 + rng.random()}
        return {"step": step, "tokens_seen": (step + 1) * 65536} | train | evals | stds | speed

    write_metrics(path, [row(step) for step in range(rows)])


def seconds(reader: str, src: Path, path: Path) -> float:
    env = os.environ | {"PYTHONPATH": str(src)}
    argv = [sys.executable, "-c", TIMED.format(READERS[reader]), str(path)]
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=True)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_120_000)
    add_arguments(parser, repeats=3)
    record.add_argument(parser)
    args = parser.parse_args()
    with record.recording("metrics-read", "Reading a long metrics.csv", enabled=args.record):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "metrics.csv"
            write(path, args.rows)
            print(f"metrics.csv: {args.rows:,} rows, {path.stat().st_size / 1e6:.0f} MB")
            for reader in READERS:
                print_side_by_side(reader, lambda src: seconds(reader, src, path), args, "s")


if __name__ == "__main__":
    main()
