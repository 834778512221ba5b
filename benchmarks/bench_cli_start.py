"""CPU time of the commands that do not train: `repro status`, `repro --help`, `repro describe`,
and the workflow's dry run (`snakemake -n`).

Each command runs as a process of its own, REPEATS times, alternating with the same command of
another checkout where --against names one (its src/ first on the path), so that both meet the
same load. Prints the median CPU time (user + system, Python's own start included) of each, and
the ratio. The target for `repro status` is 0.5 s of CPU.

    python benchmarks/bench_cli_start.py [--repeats 5] [--against CHECKOUT]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import record
from side_by_side import add_arguments, print_side_by_side


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
        "snakemake -n": ["-m", "snakemake", "-n", "--cores", "1", "--quiet"],
    }


def cpu_seconds(argv: list[str], src: Path) -> float:
    """The CPU time of one run of `python ARGV` in the checkout of `src`, that src first on the
    path."""
    env = os.environ | {"PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, *argv], env=env, cwd=src.parent, capture_output=True, check=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=5)
    record.add_argument(parser)
    args = parser.parse_args()
    with record.recording(
        "cli-start", "The start of the commands that do not train", enabled=args.record
    ):
        with tempfile.TemporaryDirectory() as runs:
            for name, argv in commands(runs).items():
                print_side_by_side(name, lambda src: cpu_seconds(argv, src), args, "s CPU")


if __name__ == "__main__":
    main()
