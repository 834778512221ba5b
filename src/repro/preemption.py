"""Preemption and time limits: a signal asks the run to stop at the next step boundary.

A scheduler signals a job before it preempts it or its time runs out (SLURM: SIGTERM, or the
signal of `--signal`). The trainer then finishes the step under way, writes a checkpoint and
metrics.csv up to it, and `repro train` exits with REQUEUE_EXIT: the job is to be run again, and
the next attempt resumes from that checkpoint.
"""

from __future__ import annotations

import signal

from repro.files import ReproError

# EX_TEMPFAIL of sysexits.h, "a temporary failure: the user is invited to retry".
REQUEUE_EXIT = 75
STOP_SIGNALS = ("SIGTERM", "SIGUSR1")  # the defaults of `repro train --stop-signal`

_received: list[int] = []


class Preempted(Exception):
    """The run stopped on a signal, checkpointed at `step` (the step the next attempt starts at)."""

    def __init__(self, step: int):
        names = ", ".join(sorted({signal.Signals(s).name for s in _received})) or "another rank's"
        super().__init__(f"stopped by {names} signal at step {step}, checkpointed; "
                         f"run again to resume")
        self.step = step


def _record(signum, frame) -> None:
    _received.append(signum)
    print(f"{signal.Signals(signum).name}: stopping at the next step boundary", flush=True)


def install(names=STOP_SIGNALS) -> None:
    """Make each named signal (e.g. "SIGUSR1" or "USR1") a request to stop at a step boundary."""
    for name in names:
        upper = name.upper()
        try:
            number = signal.Signals[upper if upper.startswith("SIG") else f"SIG{upper}"]
        except KeyError:
            raise ReproError(f"--stop-signal: no signal named {name!r}") from None
        signal.signal(number, _record)


def requested() -> bool:
    """Whether a stop signal has arrived in this process."""
    return bool(_received)
