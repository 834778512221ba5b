"""TCMalloc for the commands that run the model (`repro train`, `repro evaluate`).

glibc's malloc serves every allocation above 32 MiB (a micro-batch's logits, their gradients) with
a fresh mmap and unmaps it on free, so each micro-batch faults those pages in again: on a CPU run
with many micro-batches, up to a third of its CPU time goes to the kernel. Keeping glibc's freed
memory instead (mallopt) fragments its heap without bound: gigabytes in one evaluation of many
micro-batches. TCMalloc (gperftools) keeps freed pages in its page heap, reuses them for blocks of
any size and returns them to the kernel gradually: a run keeps glibc's footprint at a fraction of
its page faults (docs/performance.md, "CPU memory"; benchmarks/bench_allocator.py measures both).
jemalloc, as Debian builds it, unmaps blocks above 8 MiB at once, as glibc does.

An allocator is chosen before a process starts (LD_PRELOAD), so these commands start themselves
again once, under TCMalloc, where the system has it (Debian: libtcmalloc-minimal4); where it has
not, they run under glibc's malloc as it is, and training on the CPU says so in one line.
REPRO_MALLOC=glibc keeps glibc's malloc. Nothing else (an import, a test, a notebook) changes the
allocator.
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
    them (repro.cli.main), never meeting Python's defaults (a traceback, or exit 143)."""
    if os.environ.get(ENV) or not sys.platform.startswith("linux") or active():
        return
    library = _library()
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


def _library() -> str | None:
    """TCMalloc's library (a name ld.so finds), or None where it is not installed. find_library
    runs ldconfig and gcc: with LD_PRELOAD naming a missing file, ld.so's error lines are in
    their output, which it takes for a file name and fails to open (an OSError)."""
    try:
        return ctypes.util.find_library(LIBRARY)
    except OSError:
        return None


def notice() -> str | None:
    """One line for a CPU run where TCMalloc is not installed; else None."""
    if active() or os.environ.get(ENV) == "glibc" or _library():
        return None
    return (
        f"repro: TCMalloc not found ({INSTALL}): training under glibc's malloc, whose page "
        f"faults can take a third of a CPU run's time"
    )
