"""What fits a device's memory: a model's training state at all, and the largest training
micro-batch that fits this GPU (`runtime.train_micro_batch: auto`). Probes take training's inputs,
so the graph compiled at the chosen size is training's own: one cold compile per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from repro.config import ModelConfig
from repro.data.batches import inputs_targets
from repro.errors import ReproError
from repro.model import parameter_counts
from repro.runtime.device import free_device_memory, out_of_memory

LARGEST_PROBED = 96  # micro-batches of 32-96 are where an H100/H200 is expected to gain
MEMORY_HEADROOM = 0.85  # of the GPU's memory a probe may use: the optimiser state comes later
# What the optimiser state may take at most, beside the probe's peak: the rest is the allocator's.
OPTIMIZER_HEADROOM = 0.95
FIRST_PROBED = 12  # the paper's micro-batch: where the uncompiled pass measures the memory


def candidates(batch_size: int, ranks: int = 1, largest: int = LARGEST_PROBED) -> list[int]:
    """The micro-batches dividing a rank's share of the batch on `ranks` GPUs, smallest first."""
    if batch_size % ranks:
        raise ReproError(
            f"a batch of {batch_size} sequences cannot be shared equally by {ranks} ranks: "
            f"use a number of GPUs that divides it"
        )
    share = batch_size // ranks
    return [n for n in range(1, min(share, largest) + 1) if share % n == 0]


# What training holds for each weight: the weight, its gradient and AdamW's two moments.
TRAINING_COPIES = 4


def weight_bytes(config: ModelConfig) -> int:
    """The bytes of a model's float32 weights, counted on the meta device, without allocating."""
    return 4 * parameter_counts(config)["total_params"]


def largest_fitting(
    batch_size: int,
    measure: Callable[[int, bool], int | None],
    fixed: int,
    limit: float,
    ranks: int = 1,
    largest: int = LARGEST_PROBED,
) -> int:
    """The largest candidate micro-batch whose peak memory is within `limit` bytes.

    measure(n, compiled): a pass's peak bytes, None when out of memory. One uncompiled pass gives
    the bytes per sequence (it keeps more activations, so the prediction errs towards fitting);
    the predicted size is checked compiled, and only if that fails the next smaller one.
    """
    sizes = candidates(batch_size, ranks, largest)
    first = next((n for n in sizes if n >= FIRST_PROBED), sizes[-1])
    too_large = math.inf  # the smallest size that did not fit uncompiled: none above is tried
    for n in [first] + [m for m in reversed(sizes) if m < first]:
        peak = measure(n, False)
        if peak is not None and peak <= limit:
            break
        too_large = n
    else:
        raise ReproError(
            f"no training micro-batch fits this device's memory (batch {batch_size}, "
            f"{ranks} rank(s), limit {limit / 2**30:.1f} GiB)"
        )
    per_sequence = max(peak - fixed, 0) / n
    predicted = [
        m for m in sizes if m <= n or (m < too_large and fixed + per_sequence * m <= limit)
    ]
    for m in reversed(predicted):
        peak = measure(m, True)
        if peak is not None and peak <= limit:
            return m
    raise ReproError(
        f"no training micro-batch fits this device's memory as compiled (batch {batch_size}, "
        f"{ranks} rank(s), limit {limit / 2**30:.1f} GiB)"
    )


def peak_memory(model, micro_batch: int, block_size: int, autocast) -> int | None:
    """Peak bytes of a forward and backward pass, None when out of memory; leaves nothing behind."""
    device = next(model.parameters()).device
    free_device_memory()
    torch.cuda.reset_peak_memory_stats(device)
    window = loss = peak = None
    try:
        shape = (micro_batch, block_size + 1)
        window = torch.randint(model.config.vocab_size, shape, device=device)
        with autocast:
            loss = model(*inputs_targets(window))
        loss.backward()
        peak = torch.cuda.max_memory_allocated(device)
    except RuntimeError as error:  # OutOfMemoryError, cuBLAS's, inductor's: all RuntimeErrors
        if not out_of_memory(error):
            raise
    window = loss = None  # the pass's graph, before its memory is freed
    model.zero_grad(set_to_none=True)
    free_device_memory()
    return peak


def probe_limit(total: int, weight_bytes: int) -> float:
    """The peak bytes a probe may reach on a GPU of `total` bytes: MEMORY_HEADROOM of it, less
    where AdamW's moments (allocated at the first step, after the probe) would not fit the rest."""
    return min(MEMORY_HEADROOM * total, OPTIMIZER_HEADROOM * total - 2 * weight_bytes)


def auto_micro_batch(model, batch_size: int, block_size: int, autocast, ranks: int = 1) -> int:
    """The largest micro-batch for the model the steps call on its GPU. Where it compiled more than
    one size, its graphs are dropped: each counts towards dynamo's recompile limit."""
    device = next(model.parameters()).device
    total = torch.cuda.get_device_properties(device).total_memory
    uncompiled = getattr(model, "_orig_mod", model)  # torch.compile's module, or the model
    compiled_sizes = []

    def measure(n: int, compiled: bool) -> int | None:
        peak = peak_memory(model if compiled else uncompiled, n, block_size, autocast)
        compiled_sizes.extend([n] if compiled else [])
        said = "out of memory" if peak is None else f"{peak / 2**30:.1f} GiB"
        how = "as the steps run it" if compiled else "uncompiled"
        print(f"micro-batch probe: {n} sequences {how}, peak {said}", flush=True)
        return peak

    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    fixed = torch.cuda.memory_allocated(device) + weights  # what is held, and the gradients
    limit = probe_limit(total, weights)
    chosen = largest_fitting(batch_size, measure, fixed, limit, ranks)
    if len(compiled_sizes) > 1:
        torch._dynamo.reset()
    torch.cuda.reset_peak_memory_stats(device)
    return chosen
