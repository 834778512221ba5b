"""glibc malloc tuned for CPU training: freed tensor memory is reused within a step, and handed
back to the kernel at the step's end.

By default glibc serves every large allocation (the logits, their gradients) with a fresh mmap and
unmaps it on free, so each micro-batch faults those pages in again: on a 2-core CPU run that was
half the time, spent in the kernel. Serving them from the heap instead (no mmap, no automatic trim)
keeps the pages, but the heap fragments (evaluation and training micro-batches allocate different
sizes) and grows without bound: gigabytes within a few steps of a 40-micro-batch run. So training
keeps freed memory during a step, where the same sizes come back micro-batch after micro-batch, and
calls malloc_trim(3) at each step's end, which returns every free page of every arena: resident
memory is back to what is live at each step boundary. docs/performance.md, "CPU memory", has the
figures (benchmarks/bench_allocator.py).

mallopt(3) acts from inside the process, so every way training starts (the `repro` command,
Snakemake rules, tests, notebooks) gets it; repro.train applies it when a run starts on the CPU,
never at import.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# <malloc.h>
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
_kept = False  # whether keep_freed_memory has tuned this process


@functools.cache  # find_library runs ldconfig
def _libc():
    """glibc, or None where libc is another one (musl, macOS, Windows: nothing to tune)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def keep_freed_memory() -> bool:
    """Serve large allocations from the heap and trim it only when asked (release_freed_memory);
    False where libc is not glibc."""
    global _kept
    libc = _libc()
    if libc is None:
        return False
    # No mmap'd chunks (the mmap threshold cannot be set above 32 MiB, and the logits are
    # larger), and a trim threshold no heap reaches.
    _kept = bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
    return _kept


def release_freed_memory() -> None:
    """Hand every free page of the heap back to the kernel (at a step's end), where
    keep_freed_memory has kept them; elsewhere (CUDA training) nothing."""
    if _kept:
        _libc().malloc_trim(0)
