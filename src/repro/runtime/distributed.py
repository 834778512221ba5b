"""One run across GPUs: the ranks torchrun starts share each step's micro-batches and evaluations.

Each step consumes the same sequences in the same order as one process (docs/distributed.md):
rank r takes its contiguous share of the micro-batches, and losses and evaluations reduce to the
1-process values, so a run resumes on any number of GPUs. Without torchrun every function here is
the 1-process identity.
"""

from __future__ import annotations

import atexit
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from repro.errors import ReproError

_control = None  # a gloo group for host-side decisions (the stop flag), whatever the backend


class DistributedError(ReproError):
    """A run that cannot be shared by this many ranks; the message says why."""


def launched() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init(device: torch.device) -> None:
    """Join torchrun's process group (from its environment variables), once per process."""
    global _control
    if not launched() or dist.is_initialized():
        return
    cuda = device.type == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    _control = dist.new_group(backend="gloo") if cuda else dist.group.WORLD
    atexit.register(dist.destroy_process_group)


def size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def first_process() -> bool:
    """Rank 0 by torchrun's environment (or no torchrun), before and after the group exists."""
    return int(os.environ.get("RANK", "0")) == 0


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    return rank() == 0


def share(n: int) -> range:
    """This rank's contiguous share of n micro-batches (all of them in one process)."""
    mine = range(n * rank() // size(), n * (rank() + 1) // size())
    if not mine:
        raise DistributedError(
            f"{n} micro-batches cannot be shared by {size()} ranks: use fewer "
            f"GPUs per run or a smaller --train-micro-batch"
        )
    return mine


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """The model the steps call: under torchrun, DDP (which averages gradients across ranks)."""
    if not dist.is_initialized():
        return model
    # The model has no buffers for DDP to broadcast, so a forward pass is never a collective:
    # the ranks' evaluation shares may differ in length (tests/core/training/test_distributed.py
    # checks).
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)


def no_sync(model: torch.nn.Module, last: bool):
    """Around a micro-step's forward and backward: gradients are averaged on the last one only."""
    return nullcontext() if last or not dist.is_initialized() else model.no_sync()


def mean(value: torch.Tensor) -> torch.Tensor:
    if not dist.is_initialized():
        return value
    dist.all_reduce(value)
    return value / size()


def gather(local: torch.Tensor, n: int, mine: range) -> torch.Tensor:
    """The n values of which this rank computed `local`, those at `mine`: every rank's, in order."""
    if not dist.is_initialized():
        return local
    full = torch.zeros(n, dtype=local.dtype, device=local.device)
    full[mine.start : mine.stop] = local
    dist.all_reduce(full)  # each value is one rank's plus zeros: exact
    return full


def any_rank(flag: bool) -> bool:
    """Whether `flag` is true on any rank: the ranks act on one decision at the same step."""
    return bool(_reduce(int(flag), dist.ReduceOp.MAX))


def smallest(value: int) -> int:
    """The smallest of the ranks' values: one choice (e.g. a micro-batch that fits) for all."""
    return _reduce(value, dist.ReduceOp.MIN)


def _reduce(value: int, op) -> int:
    if not dist.is_initialized():
        return value
    tensor = torch.tensor(value)
    dist.all_reduce(tensor, op=op, group=_control)  # on the host: no device synchronisation
    return int(tensor)
