"""One optimiser step and one evaluation, and the learning-rate schedule that drives them.

repro.training.run runs these step after step for a run (on what repro.training.build makes);
repro.annex.perf.bench
times them; repro.evaluate scores a checkpoint with eval_losses exactly as training evaluates.
"""

from __future__ import annotations

import math

import torch

from repro.data.batches import Batches, DeviceBatches
from repro.runtime import distributed


def learning_rate(
    step: int,
    lr_max: float,
    lr_min: float,
    warmup_steps: int,
    decay_steps: int,
    schedule: str,
) -> float:
    """Linear warm-up, then until decay_steps either cosine from lr_max to lr_min, then lr_min
    (the paper's, docs/specification.md §2), or `linear` from lr_max to zero, then zero (decay
    to zero; lr_min unused)."""
    if step < warmup_steps:
        return lr_max * (step + 1) / (warmup_steps + 1)
    if schedule == "linear":
        return lr_max * max(decay_steps - step, 0) / (decay_steps - warmup_steps)
    if step > decay_steps:
        return lr_min
    progress = (step - warmup_steps) / (decay_steps - warmup_steps)
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr_max - lr_min)


@torch.no_grad()
def eval_losses(model, batches: Batches, row: int, n_batches: int, autocast) -> dict:
    """Mean and std of the micro-batch losses on the fixed eval-train and eval-val sequences."""
    model.eval()
    device = next(model.parameters()).device
    mine = distributed.share(n_batches)
    pinned = device.type == "cuda"  # copies from pinned memory do not block the host
    result = {}
    for stream in ("eval_train", "eval_val"):
        losses = []  # kept on the device: one synchronisation per stream, not per micro-batch
        for k in mine:
            x, y = (
                (t.pin_memory() if pinned else t).to(device, non_blocking=pinned)
                for t in batches.get(stream, row, k)
            )
            with autocast:
                losses.append(model(x, y).float())
        losses = distributed.gather(torch.stack(losses), n_batches, mine)  # each rank's share
        result[f"{stream}_loss"] = losses.mean().item()
        result[f"{stream}_std"] = losses.std().item()
    model.train()
    return result


def train_step(
    model,
    optimizer,
    batches: DeviceBatches,
    step: int,
    grad_clip: float,
    autocast,
) -> torch.Tensor:
    """One optimiser step over the batches' accumulation micro-batches (Batches.accumulation, the
    slices they take of a row); returns the mean loss (on device).

    Nothing here waits for the device: the loss stays a device tensor until the caller logs it.
    Under torchrun a rank takes its share of the micro-batches; DDP averages (hence the scale).
    """
    total = torch.zeros((), device=batches.device)
    accumulation = batches.accumulation
    mine, ranks = distributed.share(accumulation), distributed.size()
    for k, (x, y) in zip(mine, batches.step(step, mine)):
        with distributed.no_sync(model, last=k == mine[-1]):
            with autocast:
                loss = model(x, y) / (accumulation / ranks)
            loss.backward()
        total += loss.detach()
    total = distributed.mean(total)
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total
