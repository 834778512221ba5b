"""The `repro` command's entry point, and `python -m repro`'s: `repro train` answers a stop signal
from its first lines on.

Importing the command line (torch and the package: a tenth of a second or more) comes after the
stop handlers, so that a scheduler's SIGTERM or a Ctrl-C during it ends the process in one line
with training's exit statuses (repro.runtime.preemption: 75, or 130 for Ctrl-C), not with a
traceback or a bare 143. This module imports only what those handlers need.
"""

import sys

from repro.runtime import stop_at_once

if sys.argv[1:2] == ["train"]:  # first of all: the next import alone takes hundredths of a second
    stop_at_once.install()

from repro.runtime import preemption  # noqa: E402


def main() -> int:
    if sys.argv[1:2] == ["train"]:
        preemption.exit_until_started()
    try:  # Ctrl-C while the command line is imported or parsed: one line, not a traceback
        from repro.cli import main as command_line  # the slow imports, under those handlers

        return command_line()
    except KeyboardInterrupt:
        print("repro: interrupted", file=sys.stderr)
        return preemption.INTERRUPT_EXIT
