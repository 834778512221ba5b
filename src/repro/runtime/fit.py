"""The largest training micro-batch that fits this GPU (`runtime.train_micro_batch: auto`).

A larger micro-batch means fewer micro-steps per optimiser step, so fewer of their fixed costs
(weight casts, launches, gradient accumulation); the step's mathematics are the same.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from repro.errors import ReproError

LARGEST_PROBED = 96  # micro-batches of 32-96 are where an H100/H200 is expected to gain
MEMORY_HEADROOM = 0.85  # of the GPU's memory a probe may use: the optimiser state comes later


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
