"""The evaluation losses training computes at its evaluation steps (and `repro evaluate` of a
checkpoint, exactly as training does), and the memory their logits take.
"""

from __future__ import annotations

import torch

from repro.data.batches import Batches
from repro.runtime import distributed


def evaluation_logits_bytes(run) -> int:
    """The float32 logits the loss holds at once for one evaluation micro-batch."""
    m = run.model
    return 4 * run.train.eval_micro_batch * m.block_size * m.vocab_size // run.runtime.loss_chunks


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
