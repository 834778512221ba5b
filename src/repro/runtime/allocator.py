"""glibc malloc tuned for training: freed tensor memory is kept, not handed back to the kernel.

By default glibc serves every large allocation (the logits, their gradients) with a fresh mmap and
trims the heap on free, so each training step faults those pages in again: on a 2-core CPU run
that was half the time, spent in the kernel (page faults and system time of a smoke run measured
under /usr/bin/time -v: docs/performance.md). The MALLOC_*_ environment variables fix
this only when set before the process starts; mallopt(3) does the same from inside the process,
so every way training starts (the `repro` command, Snakemake rules, tests, notebooks) gets it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# <malloc.h>
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    """Serve large allocations from the heap and never trim it; False where libc is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):  # musl, macOS, Windows: nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # No mmap'd chunks (the mmap threshold cannot be set above 32 MiB, and the logits are
    # larger), and a trim threshold no heap reaches.
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
