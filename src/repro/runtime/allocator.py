"""TCMalloc for the commands that run the model: glibc's malloc faults large blocks in afresh at
every micro-batch, and an allocator is chosen before a process starts, so those commands restart
once under it (docs/performance.md, "CPU memory"; REPRO_MALLOC=glibc keeps glibc's).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

LIBRARY = "tcmalloc_minimal"  # gperftools' TCMalloc without its profilers
ENV = "REPRO_MALLOC"  # "tcmalloc" once restarted under it; "glibc": keep glibc's malloc
INSTALL = "apt-get install libtcmalloc-minimal4"


def active() -> bool:
    """Whether this process allocates with TCMalloc (its tc_malloc is in the global namespace)."""
    return hasattr(ctypes.CDLL(None), "tc_malloc")


def restart_under_tcmalloc(held: set[int] = frozenset()) -> None:
    """Replace this process by the same command under TCMalloc, once; nothing where TCMalloc is
    in use already, is not installed, or the platform has no LD_PRELOAD. The signals `held`
    (those this process handles) are blocked across the exec, which resets handlers but keeps
    the blocked set: one arriving meanwhile waits for the new process to handle it and unblock
    them (repro.cli.assembly.main), never meeting Python's defaults (a traceback, or exit 143)."""
    if os.environ.get(ENV) or not sys.platform.startswith("linux") or active():
        return
    library = tcmalloc_library()
    if library is None:
        return
    # what LD_PRELOAD names that exists: a missing file would make ld.so print an error line
    # in this process and every process it starts
    named = [p for p in os.environ.get("LD_PRELOAD", "").split() if os.path.exists(p)]
    preload = " ".join([library, *named])
    env = os.environ | {"LD_PRELOAD": preload, ENV: "tcmalloc"}  # never a second restart
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def tcmalloc_library() -> str | None:
    """TCMalloc's library, or None. find_library runs ldconfig and gcc: with LD_PRELOAD naming a
    missing file, ld.so's error lines in their output make it raise an OSError."""
    try:
        return ctypes.util.find_library(LIBRARY)
    except OSError:
        return None


def notice() -> str | None:
    """One line for a CPU run where TCMalloc is not installed; else None."""
    if active() or os.environ.get(ENV) == "glibc" or tcmalloc_library():
        return None
    return (
        f"repro: TCMalloc not found ({INSTALL}): training under glibc's malloc, whose page "
        f"faults can take a third of a CPU run's time"
    )
