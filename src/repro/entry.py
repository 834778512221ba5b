"""The `repro` command's entry point, and `python -m repro`'s: `repro train` answers a stop signal
from its first lines on.

Importing the command line (torch and the package: a tenth of a second or more) comes after the
stop handlers, so that a scheduler's SIGTERM or a Ctrl-C during it ends the process in one line
with training's exit statuses (repro.runtime.signals: 75, or 130 for Ctrl-C), not with a
traceback or a bare 143. This module imports only what those handlers need.
"""

import signal
import sys

TRAIN = sys.argv[1:2] == ["train"]
# SIGINT, SIGTERM, SIGUSR1: the signals repro.runtime.signals.exit_until_started handles by default.
EARLY = {signal.SIGINT, signal.SIGTERM, signal.SIGUSR1}
if TRAIN:  # held while the handlers' own module is imported, then delivered to them
    signal.pthread_sigmask(signal.SIG_BLOCK, EARLY)

from repro.runtime import signals  # noqa: E402

if TRAIN:  # first of all: the next import alone takes hundredths of a second
    signals.exit_until_started()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, EARLY)


def main() -> int:
    try:  # Ctrl-C while the command line is imported or parsed: one line, not a traceback
        from repro.cli.assembly import main as command_line  # the slow imports, under the handlers

        return command_line()
    except KeyboardInterrupt:
        print("repro: interrupted", file=sys.stderr)
        return signals.INTERRUPT_EXIT
