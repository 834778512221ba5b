"""What a run trains with on a device: the model, its AdamW, the compiled model the steps call,
the autocast context, all from the run's resolved configuration (repro.config.RunConfig), and the
training micro-batch that fits them.

repro.training.run builds them once per session; repro.annex.perf.bench builds them to time steps.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from repro.config import AdamW, RunConfig
from repro.model import GPT
from repro.runtime import distributed
from repro.runtime.device import precision
from repro.runtime.fit import (
    TRAINING_COPIES,
    auto_micro_batch,
    evaluation_logits_bytes,
    weight_bytes,
)
from repro.runtime.memory import check_memory


def make_model(run: RunConfig, device: torch.device) -> GPT:
    """The run's model, initialised from train.init_seed, with its runtime speed switches."""
    torch.manual_seed(run.train.init_seed)
    model = GPT(run.model).to(device)
    model.fuse_projections(run.runtime.enabled("fused_projection", device.type))
    model.loss_chunks = run.runtime.loss_chunks
    return model


def make_optimizer(model: GPT, adamw: AdamW, fused_kernel: bool) -> torch.optim.AdamW:
    """AdamW with weight decay on every parameter of 2 or more dimensions only (§2).

    fused_kernel: torch's fused (single-kernel) AdamW, CUDA only; the same update."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": adamw.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups,
        lr=adamw.lr_max,
        betas=(adamw.beta1, adamw.beta2),
        eps=adamw.eps,
        fused=fused_kernel,
    )


class Built(NamedTuple):
    """What build makes for a run on a device."""

    model: GPT
    step_model: torch.nn.Module  # the model, or its compiled (and DDP) wrapper: what steps call
    optimizer: torch.optim.AdamW
    autocast: object  # the autocast context of the device's precision


def build(run: RunConfig, device: torch.device) -> Built:
    """The model, the model the steps call (compiled or not), the optimiser, the autocast context.

    The fast path (§2): TF32 matmuls, bf16 autocast, fused AdamW, torch.compile and the fused
    residual_gelu projection, each by default on CUDA only; SDPA picks flash attention itself.
    """
    what = f"training {run.experiment.name} at preset {run.preset_name}"
    needed = TRAINING_COPIES * weight_bytes(run.model) + evaluation_logits_bytes(run)
    check_memory(what, needed, device)  # before allocating
    autocast = precision(device)
    model = make_model(run, device)
    optimizer = make_optimizer(model, run.optimizer, fused_kernel=device.type == "cuda")
    # Static shapes: the train and eval micro-batches each get their own specialised graph.
    step_model = distributed.wrap(model, device)
    if run.runtime.enabled("compile", device.type):
        step_model = torch.compile(step_model, dynamic=False)
    return Built(model, step_model, optimizer, autocast)


def with_train_micro_batch(run: RunConfig, built: Built) -> RunConfig:
    """The run with runtime.train_micro_batch a number, the one place it is resolved (training
    and `repro bench` both call this): `auto` on a GPU is the largest that fits the model the
    steps call, the same on every rank; None, and `auto` elsewhere, the evaluation's micro-batch.
    """
    chosen, (model, step_model, _, autocast) = run.runtime.train_micro_batch, built
    if isinstance(chosen, int):
        return run  # a number already: its relations were checked when it was set
    if chosen == "auto" and next(model.parameters()).device.type == "cuda":
        # Under torchrun the bare model, whose backward is no collective: each rank probes its GPU.
        probed = model if distributed.launched() else step_model
        chosen = auto_micro_batch(
            probed, run.train.batch_size, run.model.block_size, autocast, distributed.size()
        )
        chosen = distributed.smallest(chosen)  # one micro-batch for every rank
        print(f"{run.experiment.name}: training micro-batch {chosen} (auto)", flush=True)
    else:
        chosen = run.train.eval_micro_batch
    return run.with_runtime(train_micro_batch=chosen)
