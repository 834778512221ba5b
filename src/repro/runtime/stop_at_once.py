"""A stop signal before training's steps: the process ends at once, in one line.

Imports only what the handler needs (os, signal), so that repro.entry installs it before
anything slower is imported: a Ctrl-C in a command's first hundredths of a second is then one
line too, not a KeyboardInterrupt traceback from inside an import.
"""

import os
import signal

# EX_TEMPFAIL of sysexits.h, "a temporary failure: the user is invited to retry".
REQUEUE_EXIT = 75
# 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C, so that a script stops too.
INTERRUPT_EXIT = 130
# The signals stopped by default: Ctrl-C and `repro train --stop-signal`'s defaults.
DEFAULT = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


def exit_outside_steps(signum, frame) -> None:
    """No step is under way and every file is written whole (atomically): nothing is lost."""
    name = signal.Signals(signum).name
    os.write(2, f"repro: stopped by {name} outside the training steps; run again\n".encode())
    os._exit(INTERRUPT_EXIT if signum == signal.SIGINT else REQUEUE_EXIT)


def install(numbers=DEFAULT) -> None:
    for number in numbers:
        signal.signal(number, exit_outside_steps)
