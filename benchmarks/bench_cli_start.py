"""CPU time of the commands that do not train: `repro status`, `repro --help`, `repro describe`.

Each command runs as a process of its own, REPEATS times, alternating with the same command of
another checkout where --against names one (its src/ first on the path), so that both meet the
same load. Prints the median CPU time (user + system, Python's own start included) of each, and
the ratio. The target for `repro status` is 0.5 s of CPU.

    python benchmarks/bench_cli_start.py [--repeats 5] [--against CHECKOUT]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def commands(runs: str) -> dict[str, list[str]]:
    return {
        "python -c pass": ["-c", "pass"],
        "repro --help": ["-m", "repro", "--help"],
        "repro status": ["-m", "repro", "status", "--runs-dir", runs],
        "repro describe --group table1": [
            "-m",
            "repro",
            "describe",
            "--preset",
            "paper",
            "--group",
            "table1",
        ],
    }


def cpu_seconds(argv: list[str], src: Path) -> float:
    """The CPU time of one run of `python ARGV` with `src` first on the path."""
    env = os.environ | {"PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *argv], env=env, cwd=REPO, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout, run side by side")
    args = parser.parse_args()
    sources = {"this": REPO / "src"}
    if args.against:
        sources["against"] = args.against.resolve() / "src"
    with tempfile.TemporaryDirectory() as runs:
        for name, argv in commands(runs).items():
            times = {k: [] for k in sources}
            for _ in range(args.repeats):
                for k, src in sources.items():
                    times[k].append(cpu_seconds(argv, src))
            medians = {k: statistics.median(v) for k, v in times.items()}
            line = f"{name:<32} " + "  ".join(f"{k} {m:.2f} s CPU" for k, m in medians.items())
            if args.against:
                line += f"  ratio {medians['this'] / medians['against']:.2f}"
            print(line)


if __name__ == "__main__":
    main()
