"""Preemption, time limits and Ctrl-C: a signal asks the run to stop at the next step boundary,
checkpoint and exit REQUEUE_EXIT (INTERRUPT_EXIT for Ctrl-C).
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager

from repro.errors import ReproError
from repro.runtime.stop_at_once import INTERRUPT_EXIT, REQUEUE_EXIT, exit_outside_steps

STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # the defaults of `repro train --stop-signal`
INTERRUPT = "SIGINT"  # Ctrl-C
# Stop signals whatever --stop-signal names: Ctrl-C, and the signal `kill`, a scheduler at its
# time limit and a dying workflow send (one arriving mid-step must checkpoint, not end the run).
ALWAYS = (INTERRUPT, "SIGTERM")

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
    numbers = {_signal_number(name) for name in (*names, *ALWAYS)}
    previous = {number: signal.signal(number, _record) for number in numbers}
    _received.clear()
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _received.clear()  # a stop asked for within concerns only what ran within


def exit_until_started(names=STOP_SIGNALS) -> set[int]:
    """Until stop_signals takes over (and once it hands back), each named signal and ALWAYS's end
    `repro train` at once in one line: no step is under way, and every file is written whole
    (atomically), so nothing is lost. SIGINT exits INTERRUPT_EXIT, the others REQUEUE_EXIT (a
    scheduler's SIGTERM during start-up: run again). The signals, for the allocator's restart to
    hold across its exec (restart_under_tcmalloc)."""
    numbers = {_signal_number(name) for name in (*names, *ALWAYS)}
    for number in numbers:
        signal.signal(number, exit_outside_steps)
    return numbers


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
    return bool(_received)
