"""Sizes that cannot fit the memory this process may use are refused before anything is
allocated, with the sizes in the message (the allocator's own failure is a traceback).

On the CPU, what a process may use is the least of the machine's memory, what is left under its
address-space limit (`ulimit -v`, RLIMIT_AS) and what is left under its cgroup's memory limit
(cgroup v2 memory.max or v1 memory.limit_in_bytes: a container, SLURM's --mem)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import torch

from repro.errors import ReproError

CGROUP_ROOT = Path("/sys/fs/cgroup")  # tests point this at a folder of their own
# (limit file, usage file) of cgroup v2 and v1, under the process's cgroup folder
CGROUP_FILES = (
    ("memory.max", "memory.current"),
    ("memory.limit_in_bytes", "memory.usage_in_bytes"),
)


def physical_memory() -> int:
    """This machine's memory in bytes (tests replace this to simulate a small machine)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cpu_memory() -> dict[str, int]:
    """The bytes this process may still use under each limit that applies, by its name."""
    limits = {"this machine's cpu memory": physical_memory()}
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        used = pages * os.sysconf("SC_PAGE_SIZE")
        limits["this process's address-space limit (ulimit -v) less what it uses"] = max(
            soft - used, 0
        )
    cgroup = _cgroup_left()
    if cgroup is not None:
        limits["its cgroup's memory limit less what the cgroup uses"] = cgroup
    return limits


def _cgroup_left() -> int | None:
    """What the process's cgroup may still use (limit less usage); None where none is set."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        folders = [CGROUP_ROOT / path.lstrip("/"), CGROUP_ROOT]  # a container sees its own root
        if "memory" in controllers.split(","):
            folders = [CGROUP_ROOT / "memory" / path.lstrip("/"), CGROUP_ROOT / "memory"]
        elif controllers:
            continue
        for folder in folders:
            for limit, usage in CGROUP_FILES:
                try:
                    value = (folder / limit).read_text().strip()
                    used = int((folder / usage).read_text())
                except (OSError, ValueError):
                    continue
                # "max" (v2) or a page-rounded 2**63 (v1): no limit
                return (
                    None if value == "max" or int(value) >= 1 << 62 else max(int(value) - used, 0)
                )
    return None


def check_memory(what: str, needed: int, device: torch.device = torch.device("cpu")) -> None:
    """Refuse `what` when it needs more bytes than `device` (CPU or CUDA) can give it at all."""
    if device.type == "cuda":
        name = f"this machine's {device.type} memory"
        available = torch.cuda.get_device_properties(device).total_memory
    elif device.type == "cpu":
        name, available = min(cpu_memory().items(), key=lambda item: item[1])
    else:
        return
    if needed > available:
        raise ReproError(
            f"{what} needs {needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB "
            f"of {name}: choose smaller sizes"
        )
