"""What fits a device's memory: the run's arrays at all, and the largest training micro-batch that
fits this GPU (`runtime.train_micro_batch: auto`).

Sizes that cannot fit are refused before anything is allocated, with the sizes in the message (the
allocator's own failure is a traceback).

A larger micro-batch means fewer micro-steps per optimiser step, so fewer of their fixed costs
(weight casts, launches, gradient accumulation); the step's mathematics are the same. The probe
runs one forward and backward pass of the model the steps call (compiled where compile is on, so
that it measures the compiled graph's memory, not eager's) at a few sizes, smallest first, and
extrapolates the rest: memory grows linearly with the micro-batch, so at most the one size the
line overestimates runs out of memory. Its passes take the inputs training takes (overlapping views
of one window of tokens), so that its graph at the chosen size is training's own, not one that
dynamo compiles again for other strides; its graphs are dropped afterwards (one per size probed,
they would count towards dynamo's recompile limit, past which it runs eagerly).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

import torch

from repro.errors import ReproError
from repro.model import ModelConfig, parameter_counts

LARGEST_PROBED = 96  # micro-batches of 32-96 are where an H100/H200 is expected to gain
MEMORY_HEADROOM = 0.85  # of the GPU's memory a probe may use: the optimiser state comes later
# What the optimiser state may take at most, beside the probe's peak: the rest is the allocator's.
OPTIMIZER_HEADROOM = 0.95
FIRST_PROBED = 12  # the paper's micro-batch: the line is drawn through it and the next size
# What an allocation failure says, wherever it surfaces: torch's own OutOfMemoryError, cuBLAS or
# cuDNN failing to allocate a workspace, or inductor wrapping either while it autotunes.
OUT_OF_MEMORY = ("out of memory", "ALLOC_FAILED")


def candidates(batch_size: int, ranks: int = 1, largest: int = LARGEST_PROBED) -> list[int]:
    """The micro-batches a run on `ranks` GPUs can use, smallest first: each divides a rank's
    share of the batch, so that every rank runs the same number of micro-steps."""
    if batch_size % ranks:
        raise ReproError(
            f"a batch of {batch_size} sequences cannot be shared equally by {ranks} ranks: "
            f"use a number of GPUs that divides it"
        )
    share = batch_size // ranks
    return [n for n in range(1, min(share, largest) + 1) if share % n == 0]


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


def evaluation_logits_bytes(run) -> int:
    """The float32 logits of one evaluation micro-batch (eval_micro_batch x block_size x
    vocabulary), which the loss holds at once (a loss_chunks-th of them where it is chunked);
    `run` a RunConfig or a Preset."""
    m = run.model
    return 4 * run.train.eval_micro_batch * m.block_size * m.vocab_size // run.runtime.loss_chunks


def weight_bytes(config: ModelConfig) -> int:
    """The bytes of a model's float32 weights, counted on the meta device, without allocating.
    Training holds TRAINING_COPIES times as much, and activations come on top."""
    return 4 * parameter_counts(config)["total_params"]


def largest_fitting(
    batch_size: int,
    measure: Callable[[int], int | None],
    limit: float,
    ranks: int = 1,
    largest: int = LARGEST_PROBED,
) -> int:
    """The largest candidate micro-batch whose measured peak memory is within `limit` bytes.

    measure(n): the peak bytes of a pass at micro-batch n, or None when it ran out of memory.
    The two smallest candidates from FIRST_PROBED up are measured first; a line through them
    predicts the rest, and the largest predicted to fit is tried, then the next smaller ones.
    """
    sizes = candidates(batch_size, ranks, largest)
    above = [n for n in sizes if n >= FIRST_PROBED] or sizes[-1:]
    first, rest = above[:2], above[2:]
    below = [n for n in sizes if n < first[0]]
    peaks = {}
    for n in first:
        peak = measure(n)
        if peak is None or peak > limit:
            break
        peaks[n] = peak
    if not peaks:  # not even the first: the smaller ones, largest first
        for n in reversed(below):
            peak = measure(n)
            if peak is not None and peak <= limit:
                return n
        raise ReproError(
            f"no training micro-batch fits this device's memory (batch {batch_size}, "
            f"{ranks} rank(s), limit {limit / 2**30:.1f} GiB)"
        )
    if len(peaks) < 2:  # the second did not fit, or there is only one
        return max(peaks)
    (a, pa), (b, pb) = sorted(peaks.items())
    per_sequence = max(pb - pa, 0) / (b - a)
    for n in reversed(rest):
        if pb + per_sequence * (n - b) > limit:
            continue  # predicted not to fit: never run
        peak = measure(n)
        if peak is not None and peak <= limit:
            return n
    return b


def out_of_memory(error: BaseException) -> bool:
    """Whether an error, or one it wraps, is a failure to allocate device memory."""
    while error is not None:
        if isinstance(error, torch.cuda.OutOfMemoryError) or any(
            s in str(error) for s in OUT_OF_MEMORY
        ):
            return True
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return False


def free_device_memory() -> None:
    """Hand the device's cached blocks back, after collecting what still references tensors (a
    failed pass's traceback, reference cycles): empty_cache frees only blocks nothing holds."""
    gc.collect()
    torch.cuda.empty_cache()


def peak_memory(model, micro_batch: int, block_size: int, autocast) -> int | None:
    """Peak bytes of one forward and backward pass of `micro_batch` sequences, or None when it
    ran out of memory. Leaves no gradients, graph or cached blocks behind. The inputs and targets
    are training's: the two overlapping views of a (micro_batch, block_size + 1) window."""
    from repro.data.batches import inputs_targets  # here: repro.data imports this module

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
    """The peak bytes a probe may reach on a GPU of `total` bytes: MEMORY_HEADROOM of it, and
    less where AdamW's two moments (twice the weights' bytes, allocated at the first step, after
    the probe) would not fit in the rest: a model of billions of weights on a smaller GPU."""
    return min(MEMORY_HEADROOM * total, OPTIMIZER_HEADROOM * total - 2 * weight_bytes)


def auto_micro_batch(model, batch_size: int, block_size: int, autocast, ranks: int = 1) -> int:
    """The largest micro-batch for `model` (the model the steps call) on its GPU, printing each
    probe; the peak-memory statistics and dynamo's compiled graphs are reset afterwards, so that a
    later peak is training's and training compiles its graphs anew (from inductor's cache)."""
    device = next(model.parameters()).device
    total = torch.cuda.get_device_properties(device).total_memory

    def measure(n: int) -> int | None:
        peak = peak_memory(model, n, block_size, autocast)
        said = "out of memory" if peak is None else f"{peak / 2**30:.1f} GiB"
        print(f"micro-batch probe: {n} sequences, peak {said}", flush=True)
        return peak

    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    chosen = largest_fitting(batch_size, measure, probe_limit(total, weights), ranks)
    torch._dynamo.reset()
    torch.cuda.reset_peak_memory_stats(device)
    return chosen
