"""The `repro` command line: a thin layer over the library; every subcommand calls one function.

Any ReproError is printed as one line, `repro: error: ...`, with exit status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import repro
from repro.annex.cli import authors, compare, downstream, findings, models, perf
from repro.cli import data, status, training
from repro.errors import ReproError
from repro.runtime import allocator, preemption
from repro.runtime.parent import exit_with_parent

# In the order `repro --help` lists them: the pipeline's own commands first.
FAMILIES = (data, training, perf, status, compare, models, authors, downstream, findings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {repro.__version__}",
        help="print the package version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parent = os.getppid()  # first: the process that started this one, before anything slow
    args = build_parser().parse_args(argv)
    held = set()
    try:  # a stop signal before training's own handlers: one line (repro.runtime.preemption)
        if argv is None and args.command == "train":  # a process of its own, not a caller's
            held = preemption.exit_until_started(args.stop_signal or preemption.STOP_SIGNALS)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    if argv is None and getattr(args, "tcmalloc", False):
        # The command as it was started, again under TCMalloc (repro.runtime.allocator): before
        # torch is imported, so that the restart costs only Python's start.
        allocator.restart_under_tcmalloc(held)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, held)  # those the restart held, handled now
    if getattr(args, "exit_with_parent", False):
        # Armed before torch is imported (seconds): a parent killed meanwhile is caught too.
        exit_with_parent(parent)
    try:
        args.func(args)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    except preemption.Preempted as e:
        print(f"repro: {e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:  # Ctrl-C outside training's step loop: one line, not a traceback
        print("repro: interrupted", file=sys.stderr)
        return preemption.INTERRUPT_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
