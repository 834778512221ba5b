"""Sizes that cannot fit a machine's memory are refused before anything is allocated, with the
sizes in the message (the allocator's own failure is a traceback)."""

from __future__ import annotations

import os

import torch

from repro.errors import ReproError


def physical_memory() -> int:
    """This machine's memory in bytes (tests replace this to simulate a small machine)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(what: str, needed: int, device: torch.device = torch.device("cpu")) -> None:
    """Refuse `what` when it needs more bytes than `device` (CPU or CUDA) has at all."""
    if device.type == "cuda":
        available = torch.cuda.get_device_properties(device).total_memory
    elif device.type == "cpu":
        available = physical_memory()
    else:
        return
    if needed > available:
        raise ReproError(
            f"{what} needs {needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB "
            f"of this machine's {device.type} memory: choose smaller sizes"
        )
