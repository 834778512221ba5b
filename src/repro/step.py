"""One optimiser step and one evaluation: the schedule, the optimiser, the model they drive.

repro.train runs these step after step for a run; repro.perf.bench times them; repro.evaluate
scores a checkpoint with eval_losses exactly as training evaluates.
"""

from __future__ import annotations

import math

import torch

from repro.config import RunConfig
from repro.data.batches import Batches, DeviceBatches
from repro.model import GPT
from repro.runtime import distributed
from repro.runtime.device import precision
from repro.runtime.fit import TRAINING_COPIES, check_memory, weight_bytes


def learning_rate(
    step: int, lr_max: float, lr_min: float, warmup_steps: int, decay_steps: int
) -> float:
    """Linear warm-up, then cosine from lr_max to lr_min until decay_steps, then lr_min
    (docs/specification.md §2)."""
    if step < warmup_steps:
        return lr_max * (step + 1) / (warmup_steps + 1)
    if step > decay_steps:
        return lr_min
    progress = (step - warmup_steps) / (decay_steps - warmup_steps)
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr_max - lr_min)


def make_optimizer(model: GPT, run: RunConfig, fused: bool) -> torch.optim.AdamW:
    """AdamW with weight decay on every parameter of 2 or more dimensions only (§2)."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = run.optimizer.weight_decay
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    t = run.train
    return torch.optim.AdamW(
        groups, lr=run.optimizer.lr_max, betas=(t.beta1, t.beta2), eps=t.adam_eps, fused=fused
    )


def build(
    run: RunConfig,
    device: torch.device,
    compile: bool | str | None = None,
    fused: bool | None = None,
):
    """The model, the model the steps call (compiled or not), the optimiser, the autocast context.

    The fast path (§2): TF32 matmuls, bf16 autocast, fused AdamW, torch.compile and the fused
    residual_gelu projection, each by default on CUDA only; SDPA picks flash attention itself.
    """
    cuda = device.type == "cuda"
    autocast = precision(device)
    what = f"training {run.experiment.name} at preset {run.preset.name}"
    check_memory(what, TRAINING_COPIES * weight_bytes(run.model), device)
    torch.manual_seed(run.train.init_seed)
    model = GPT(run.model).to(device)
    model.fuse_projections(cuda if fused is None else fused)
    model.loss_chunks = run.preset.runtime.loss_chunks
    optimizer = make_optimizer(model, run, fused=cuda)
    compile = run.preset.runtime.compile if compile is None else compile
    # Static shapes: the train and eval micro-batches each get their own specialised graph.
    compiled = compile is True or (compile == "auto" and cuda)
    step_model = distributed.wrap(model, device)
    step_model = torch.compile(step_model, dynamic=False) if compiled else step_model
    return model, step_model, optimizer, autocast


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
    accumulation: int,
    grad_clip: float,
    autocast,
) -> torch.Tensor:
    """One optimiser step over `accumulation` micro-batches; returns the mean loss (on device).

    Nothing here waits for the device: the loss stays a device tensor until the caller logs it.
    Under torchrun a rank takes its share of the micro-batches; DDP averages (hence the scale).
    """
    total = torch.zeros((), device=batches.device)
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
