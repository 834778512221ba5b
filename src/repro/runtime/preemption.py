"""Preemption and time limits: a signal asks the run to stop at the next step boundary.

A scheduler signals a job before it preempts it or its time runs out (SLURM: SIGTERM, or the
signal of `--signal`). The trainer then finishes the step under way, writes a checkpoint and
metrics.csv up to it, and `repro train` exits with REQUEUE_EXIT: the job is to be run again, and
the next attempt resumes from that checkpoint.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

from repro.errors import ReproError

# EX_TEMPFAIL of sysexits.h, "a temporary failure: the user is invited to retry".
REQUEUE_EXIT = 75
STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # the defaults of `repro train --stop-signal`

_received: list[int] = []


class Preempted(Exception):
    """The run stopped on a signal, checkpointed at `step` (the step the next attempt starts at)."""

    def __init__(self, step: int):
        names = ", ".join(sorted({signal.Signals(s).name for s in _received})) or "another rank's"
        super().__init__(
            f"stopped by {names} signal at step {step}, checkpointed; run again to resume"
        )
        self.step = step


def _record(signum, frame) -> None:
    _received.append(signum)
    print(f"{signal.Signals(signum).name}: stopping at the next step boundary", flush=True)


@contextmanager
def stop_signals(names=STOP_SIGNALS):
    """Within: each named signal (e.g. "SIGUSR1" or "USR1") asks to stop at a step boundary.

    The previous handlers come back on leaving: a process that goes on (a test runner whose forked
    workers are ended by SIGTERM, for one) keeps its own."""
    numbers = [_signal_number(name) for name in names]
    previous = {number: signal.signal(number, _record) for number in numbers}
    _received.clear()
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _received.clear()  # a stop asked for within concerns only what ran within


def _signal_number(name: str) -> signal.Signals:
    upper = name.upper()
    try:
        number = signal.Signals[upper if upper.startswith("SIG") else f"SIG{upper}"]
    except KeyError:
        raise ReproError(f"--stop-signal: no signal named {name!r}") from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise ReproError(f"--stop-signal: {number.name} cannot be caught, so it cannot stop a run")
    return number


def requested() -> bool:
    """Whether a stop signal has arrived in this process."""
    return bool(_received)
