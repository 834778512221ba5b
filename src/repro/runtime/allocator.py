"""TCMalloc for the commands that run the model: glibc's malloc faults large blocks in afresh at
every micro-batch, and an allocator is chosen before a process starts, so those commands restart
once under it (docs/performance.md, "CPU memory"; REPRO_MALLOC=glibc keeps glibc's). Where TCMalloc
is not installed they restart under glibc's malloc with its large blocks in transparent huge
pages (its own `glibc.malloc.hugetlb` tunable): the same blocks, freed as before, faulted in 2 MiB
at a time rather than 4 KiB.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

LIBRARY = "tcmalloc_minimal"  # gperftools' TCMalloc without its profilers
ENV = "REPRO_MALLOC"  # "tcmalloc" or HUGE_PAGES once restarted; "glibc": keep glibc's malloc
INSTALL = "apt-get install libtcmalloc-minimal4"
HUGE_PAGES = "glibc-hugepages"  # glibc's malloc, its mmapped blocks in transparent huge pages
TUNABLE = "glibc.malloc.hugetlb"  # glibc 2.35 on; 1: madvise those blocks into huge pages
THP = "/sys/kernel/mm/transparent_hugepage/enabled"  # e.g. "always [madvise] never"


def active() -> bool:
    """Whether this process allocates with TCMalloc (its tc_malloc is in the global namespace)."""
    return hasattr(ctypes.CDLL(None), "tc_malloc")


def restart_under_allocator(held: set[int] = frozenset()) -> None:
    """Replace this process by the same command under TCMalloc, or without it under glibc's
    malloc with huge pages, once; nothing where either is in use already, neither is to be had,
    or the platform has no LD_PRELOAD. The signals `held` (those this process handles) are
    blocked across the exec, which resets handlers but keeps the blocked set: one arriving
    meanwhile waits for the new process to handle it and unblock them
    (repro.cli.assembly.main), never meeting Python's defaults (a traceback, or exit 143)."""
    if os.environ.get(ENV) or not sys.platform.startswith("linux") or active():
        return
    chosen = restart_environment()
    if chosen is None:
        return
    env = os.environ | chosen  # ENV set: never a second restart
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def restart_environment() -> dict[str, str] | None:
    """What the restart adds to the environment: TCMalloc preloaded where it is installed, else
    glibc's huge-pages tunable where glibc and the kernel offer it; None where neither is."""
    library = tcmalloc_library()
    if library is not None:
        # what LD_PRELOAD names that exists: a missing file would make ld.so print an error line
        # in this process and every process it starts
        named = [p for p in os.environ.get("LD_PRELOAD", "").split() if os.path.exists(p)]
        return {"LD_PRELOAD": " ".join([library, *named]), ENV: "tcmalloc"}
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if TUNABLE in tunables or not huge_pages_offered():  # a user's own setting stays theirs
        return None
    return {"GLIBC_TUNABLES": ":".join(filter(None, [tunables, f"{TUNABLE}=1"])), ENV: HUGE_PAGES}


def huge_pages_offered() -> bool:
    """Whether glibc has the huge-pages tunable (2.35 on) and the kernel transparent huge pages
    for the blocks it madvises (THP "always" or "madvise", not "never")."""
    version = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else ""
    parts = version.removeprefix("glibc ").split(".")
    if not version.startswith("glibc ") or not all(p.isdecimal() for p in parts[:2]):
        return False
    try:
        with open(THP) as f:
            mode = f.read()
    except OSError:
        return False
    return (int(parts[0]), int(parts[1])) >= (2, 35) and "[never]" not in mode and "[" in mode


def in_use() -> str:
    """The C allocator of this process, as run.json records it: tcmalloc, glibc-hugepages (the
    restart's tunable) or glibc."""
    if active():
        return "tcmalloc"
    return HUGE_PAGES if os.environ.get(ENV) == HUGE_PAGES else "glibc"


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
    if in_use() == HUGE_PAGES:
        return (
            f"repro: TCMalloc not found ({INSTALL}): training under glibc's malloc with "
            f"transparent huge pages, which TCMalloc outruns on the CPU"
        )
    return (
        f"repro: TCMalloc not found ({INSTALL}): training under glibc's malloc, whose page "
        f"faults can take a third of a CPU run's time"
    )
