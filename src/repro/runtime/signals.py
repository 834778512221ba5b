"""Stopping on a signal, in one place: before training's steps a stop signal ends the process at
once in one line; within them it asks the run to stop at the next step boundary, checkpoint and
exit REQUEUE_EXIT (INTERRUPT_EXIT for Ctrl-C); a process the workflow starts stops when orphaned.

Imports only what the handlers need (os, signal), so that repro.entry installs them before
anything slower is imported: a Ctrl-C in a command's first hundredths of a second is then one line
too, not a KeyboardInterrupt traceback from inside an import.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager

# EX_TEMPFAIL of sysexits.h, "a temporary failure: the user is invited to retry".
REQUEUE_EXIT = 75
# 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C, so that a script stops too.
INTERRUPT_EXIT = 130
STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # the defaults of `repro train --stop-signal`
INTERRUPT = "SIGINT"  # Ctrl-C
# Stop signals whatever --stop-signal names: Ctrl-C, and the signal `kill`, a scheduler at its
# time limit and a dying workflow send (one arriving mid-step must checkpoint, not end the run).
ALWAYS = (INTERRUPT, "SIGTERM")
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

_received: list[int] = []


class Preempted(Exception):
    """The run stopped on a signal, checkpointed at `step`; `exit_status` is `repro train`'s."""

    def __init__(self, step: int):
        received = {signal.Signals(s).name for s in _received}
        names = ", ".join(sorted(received)) or "another rank's"
        super().__init__(
            f"stopped by {names} signal at step {step}, checkpointed; run again to resume"
        )
        self.step = step
        # Ctrl-C alone: the user stopped the run. Any other signal: a scheduler, to requeue it.
        self.exit_status = INTERRUPT_EXIT if received == {INTERRUPT} else REQUEUE_EXIT


def exit_outside_steps(signum, frame) -> None:
    """No step is under way and every file is written whole (atomically): nothing is lost."""
    name = signal.Signals(signum).name
    os.write(2, f"repro: stopped by {name} outside the training steps; run again\n".encode())
    os._exit(INTERRUPT_EXIT if signum == signal.SIGINT else REQUEUE_EXIT)


def exit_until_started(names=STOP_SIGNALS) -> set[int]:
    """Until stop_signals takes over (and once it hands back), each named signal and ALWAYS's end
    `repro train` at once in one line: no step is under way, and every file is written whole
    (atomically), so nothing is lost. SIGINT exits INTERRUPT_EXIT, the others REQUEUE_EXIT (a
    scheduler's SIGTERM during start-up: run again). The signals, for the allocator's restart to
    hold across its exec (repro.runtime.allocator.restart_under_allocator)."""
    numbers = {signal_number(name) for name in (*names, *ALWAYS)}
    for number in numbers:
        signal.signal(number, exit_outside_steps)
    return numbers


def _record(signum, frame) -> None:
    if not _received:
        # os.write, not print: a handler that runs while the main code is inside print would
        # find stdout's buffer locked ("reentrant call") and end in a traceback.
        os.write(2, f"{signal.Signals(signum).name}: stopping at the next step boundary\n".encode())
    _received.append(signum)


@contextmanager
def stop_signals(names=STOP_SIGNALS):
    """Within: each named signal and those of ALWAYS ask to stop at a step boundary; the previous
    handlers come back on leaving, for a process that goes on (a test runner)."""
    numbers = {signal_number(name) for name in (*names, *ALWAYS)}
    previous = {number: signal.signal(number, _record) for number in numbers}
    _received.clear()
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _received.clear()  # a stop asked for within concerns only what ran within


def requested() -> bool:
    """Whether a stop signal arrived within stop_signals."""
    return bool(_received)


@contextmanager
def sigterm_interrupts():
    """Within: SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that what a command writes
    whole (an export's partial folder) is removed (SIGTERM's default ends the process at once
    and leaves it)."""
    import threading  # here: the stop handlers above are installed before anything slower

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def signal_number(name: str) -> signal.Signals:
    """The signal `repro train --stop-signal` names, one that can be caught."""
    from repro.errors import ReproError  # only where a name is wrong

    upper = name.upper()
    try:
        number = signal.Signals[upper if upper.startswith("SIG") else f"SIG{upper}"]
    except KeyError:
        raise ReproError(f"--stop-signal: no signal named {name!r}") from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise ReproError(f"--stop-signal: {number.name} cannot be caught, so it cannot stop a run")
    return number


def exit_with_parent(parent: int | None = None) -> None:
    """Have Linux send this process SIGTERM when its parent dies (elsewhere, nothing): a trainer or
    a tokenizer's worker the workflow started then stops with it (a trainer checkpoints first).
    `parent`, the PID it had at this process's start, catches a death before this call: SIGTERM
    now."""
    if sys.platform != "linux":
        return
    import ctypes  # here: the stop handlers above are installed before anything slower

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if parent is not None and (parent == 1 or os.getppid() != parent):
        print(f"repro: the parent process ({parent}) has exited; stopping", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)
