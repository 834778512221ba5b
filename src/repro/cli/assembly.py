"""The `repro` command line's assembly: each family of subcommands in the order `repro --help`
lists them, the pipeline's own first. A core command (prepare, verify, indices, train, status)
loads no module of the annex: an annex family is imported only where one of its commands is asked
for, or the whole list is (--help, a misspelt command).

Any ReproError is printed as one line, `repro: error: ...`, with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

import repro
from repro.errors import ReproError
from repro.runtime import allocator, signals
from repro.runtime.signals import exit_with_parent

DESCRIPTION = (
    "The `repro` command line: a thin layer over the library; every subcommand calls one function."
)
FAMILIES = (
    "repro.cli.data",
    "repro.cli.training",
    "repro.annex.perf.cli",
    "repro.cli.status",
    "repro.annex.authors.cli",
    "repro.annex.models.cli",
    "repro.annex.downstream.cli",
    "repro.annex.claims.cli",
)
# The commands the core's families add, and each annex family's (a test holds both in step with
# their add_commands): the annex family a command line names is the only one it imports.
CORE_COMMANDS = ("prepare", "verify", "indices", "train", "status")
ANNEX_COMMANDS = {
    "repro.annex.perf.cli": ("bench", "describe"),
    "repro.annex.authors.cli": (
        "evaluate",
        "import-authors-run",
        "authors-runs",
        "authors-table",
        "import-audit-logs",
        "import-audit-log",
        "compare",
    ),
    "repro.annex.models.cli": ("generate", "export"),
    "repro.annex.downstream.cli": ("downstream", "downstream-table"),
    "repro.annex.claims.cli": ("claims", "evidence", "findings"),
}


def families(command: str | None) -> list[str]:
    """The families to build the parser of `command` from: the core's and the annex family that
    adds it; every family where it is none of the annex's (the help, a misspelt one)."""
    owner = [m for m, names in ANNEX_COMMANDS.items() if command in names]
    core = [m for m in FAMILIES if m not in ANNEX_COMMANDS]
    if owner:
        return [m for m in FAMILIES if m in core or m in owner]
    return core if command in CORE_COMMANDS else list(FAMILIES)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` (None: of every command)."""
    parser = argparse.ArgumentParser(prog="repro", description=DESCRIPTION)
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {repro.__version__}",
        help="print the package version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for family in families(command):
        importlib.import_module(family).add_commands(sub)
    return parser


def command_named(argv: list[str]) -> str | None:
    """The subcommand a command line names: its first argument, unless that is an option."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def main(argv: list[str] | None = None) -> int:
    parent = os.getppid()  # first: the process that started this one, before anything slow
    argv_given = sys.argv[1:] if argv is None else argv
    args = build_parser(command_named(argv_given)).parse_args(argv_given)
    held = set()
    try:  # a stop signal before training's own handlers: one line (repro.runtime.signals)
        if argv is None and args.command == "train":  # a process of its own, not a caller's
            held = signals.exit_until_started(args.stop_signal or signals.STOP_SIGNALS)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    if argv is None and getattr(args, "restarts_allocator", False):
        # The command as it was started, again under TCMalloc or glibc's huge pages
        # (repro.runtime.allocator): before torch is imported, so that the restart costs only
        # Python's start.
        allocator.restart_under_allocator(held)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, held)  # those the restart held, handled now
    if getattr(args, "exit_with_parent", False):
        # Armed before torch is imported (seconds): a parent killed meanwhile is caught too.
        exit_with_parent(parent)
    try:
        args.func(args)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    except signals.Preempted as e:
        print(f"repro: {e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:  # Ctrl-C outside training's step loop: one line, not a traceback
        print("repro: interrupted", file=sys.stderr)
        return signals.INTERRUPT_EXIT
    return 0
