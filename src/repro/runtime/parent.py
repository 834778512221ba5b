"""Stopping when orphaned: a process the workflow starts (a trainer, a tokenizer's workers) asks
Linux to send it SIGTERM when its parent dies (PR_SET_PDEATHSIG); SIGTERM makes a trainer
checkpoint and stop (repro.runtime.preemption)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_parent(parent: int | None = None) -> None:
    """Have Linux send this process SIGTERM when its parent dies (elsewhere, nothing). `parent`,
    the PID it had at this process's start, catches a death before this call: SIGTERM now."""
    if sys.platform != "linux":
        return
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if parent is not None and (parent == 1 or os.getppid() != parent):
        print(f"repro: the parent process ({parent}) has exited; stopping", file=sys.stderr)
        os.kill(os.getpid(), signal.SIGTERM)
