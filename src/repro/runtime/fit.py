"""What fits a device's memory: the run's arrays at all, and the largest training micro-batch that
fits this GPU (`runtime.train_micro_batch: auto`).

Sizes that cannot fit are refused before anything is allocated, with the sizes in the message (the
allocator's own failure is a traceback). A larger micro-batch means fewer micro-steps per optimiser
step, so fewer of their fixed costs (weight casts, launches, gradient accumulation); the step's
mathematics are the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from repro.errors import ReproError
from repro.model import GPT, ModelConfig, count_parameters

LARGEST_PROBED = 96  # the range the GPU review expects to pay off on an H100/H200: 32-96
MEMORY_HEADROOM = 0.85  # of the GPU's memory a probe may use: the optimiser state comes later


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


# What training holds for each weight: the weight, its gradient and AdamW's two moments.
TRAINING_COPIES = 4


def weight_bytes(config: ModelConfig) -> int:
    """The bytes of a model's float32 weights, counted on the meta device, without allocating.
    Training holds TRAINING_COPIES times as much, and activations come on top."""
    with torch.device("meta"):
        return 4 * count_parameters(GPT(config))["total_params"]


def largest_fitting(
    batch_size: int, fits: Callable[[int], bool], largest: int = LARGEST_PROBED
) -> int:
    """The largest divisor of batch_size, at most `largest`, for which fits(micro_batch)."""
    for micro_batch in range(min(batch_size, largest), 0, -1):
        if batch_size % micro_batch == 0 and fits(micro_batch):
            return micro_batch
    raise ReproError(f"no training micro-batch fits this device's memory (batch {batch_size})")


def fits_on_gpu(model, micro_batch: int, block_size: int, autocast) -> bool:
    """Whether one forward and backward pass of `micro_batch` sequences stays within the GPU's
    memory headroom; the model's gradients are cleared afterwards."""
    device = next(model.parameters()).device
    torch.cuda.reset_peak_memory_stats(device)
    x = torch.randint(model.config.vocab_size, (micro_batch, block_size), device=device)
    try:
        with autocast:
            loss = model(x, x)
        loss.backward()
        peak = torch.cuda.max_memory_allocated(device)
        return peak <= MEMORY_HEADROOM * torch.cuda.get_device_properties(device).total_memory
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        model.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
