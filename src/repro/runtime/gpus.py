"""GPU slots: each training process on a node takes a GPU that no other repro process holds.

Snakemake's `--resources gpu=N` caps how many GPUs jobs ask for, not which each gets: a process
on `cuda` takes an fcntl lock per GPU ($REPRO_GPU_LOCK_DIR), which the kernel releases however the
process ends. A torchrun rank fails instead of waiting (two runs' ranks could wait on each other
forever). UUIDs name the GPUs: a scheduler's cgroups renumber indices from 0.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from pathlib import Path

from repro.errors import ReproError
from repro.files import open_no_link

LOCK_DIR_ENV = "REPRO_GPU_LOCK_DIR"
WAIT_SECONDS = 10.0  # between tries while every GPU is held
_held: list[int] = []  # the open lock files: closing one would free its GPU
_claimed: list = []  # the device this process claimed: a process takes one GPU, once


class GPUError(ReproError):
    """No GPU can be given to this process; the message says why."""


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "repro-gpu-locks")


def claim_gpu(gpu_ids: list[str], directory: Path, wait: float | None = None) -> int:
    """Lock the first free GPU of `gpu_ids` for the process; with `wait`, retry every `wait` s."""
    index = _try_claim(gpu_ids, directory)
    if index is None and wait is not None:
        print(
            f"all {len(gpu_ids)} visible GPUs are held by other repro processes: waiting for "
            f"one to be free",
            flush=True,
        )
        while index is None:
            time.sleep(wait)
            index = _try_claim(gpu_ids, directory)
    if index is None:
        raise GPUError(
            f"all {len(gpu_ids)} visible GPUs are held by other repro processes "
            f"(locks in {directory}): give Snakemake --resources gpu=N with N at most "
            f"the GPUs of the machine, or pass --device cuda:N"
        )
    return index


def _try_claim(gpu_ids: list[str], directory: Path) -> int | None:
    directory.mkdir(parents=True, exist_ok=True)
    try:  # every user's jobs share the directory (sticky, like /tmp)
        directory.chmod(0o1777)
    except PermissionError:
        pass  # another user created it, and made it so
    for index, gpu in enumerate(gpu_ids):
        # Read-only: a lock file another user created can still be opened and locked.
        # Never through a link: another user's link would have this one create its target.
        path = directory / f"gpu-{gpu}.lock"
        fd = open_no_link(path, os.O_RDONLY | os.O_CREAT, "a GPU's lock file", GPUError)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held.append(fd)
        return index
    return None


def claim_device(wait: bool = True):
    """A CUDA device no other repro process holds; a later call gets the one this process holds."""
    import torch  # here, so that the slots above work (and are tested) without torch

    if _claimed:
        torch.cuda.set_device(_claimed[0])
        return _claimed[0]
    count = torch.cuda.device_count()
    if count == 0:
        raise GPUError("--device cuda: no CUDA GPU is visible")
    uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(count)]
    index = claim_gpu(uuids, lock_dir(), wait=WAIT_SECONDS if wait else None)
    print(f"GPU {index} of {count} ({uuids[index]}) is this process's", flush=True)
    torch.cuda.set_device(index)  # for what takes the current device (NCCL, compiled kernels)
    _claimed.append(torch.device("cuda", index))
    return _claimed[0]
