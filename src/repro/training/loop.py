"""One step on one page: what a run trains with, the learning-rate schedule, one optimiser step,
one evaluation, and the loop that runs them (repro.training.run holds the run around it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch

from repro.config import RunConfig
from repro.data.batches import Batches, DeviceBatches
from repro.model import GPT
from repro.rundir import RunRecord
from repro.runtime import distributed, signals
from repro.runtime.device import Kernels, check_loss_kernel, check_memory, precision
from repro.training.checkpoints import Checkpoints
from repro.training.evaluation import eval_losses, evaluation_logits_bytes
from repro.training.fit import TRAINING_COPIES, auto_micro_batch, weight_bytes
from repro.training.logs import StepLog


def make_model(run: RunConfig, device: torch.device) -> GPT:
    """The run's model, initialised from train.init_seed, with its runtime speed switches."""
    torch.manual_seed(run.train.init_seed)
    model = GPT(run.model).to(device)
    model.fuse_projections(run.runtime.enabled("fused_projection", device.type))
    model.loss_chunks = run.runtime.loss_chunks
    model.fused_loss = run.runtime.loss_kernel
    return model


def make_optimizer(model: GPT, run: RunConfig, fused_kernel: bool) -> torch.optim.AdamW:
    """AdamW with weight decay on every parameter of 2 or more dimensions only (§2)."""
    adamw, t = run.optimizer, run.train
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": adamw.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups,
        lr=adamw.lr_max,
        betas=(t.beta1, t.beta2),
        eps=t.adam_eps,
        fused=fused_kernel,
    )


class Built(NamedTuple):
    """What build makes for a run on a device."""

    model: GPT
    step_model: torch.nn.Module  # the model, or its compiled (and DDP) wrapper: what steps call
    optimizer: torch.optim.AdamW
    autocast: Kernels  # every forward's context: the precision's autocast, the SDPA backend


def build(run: RunConfig, device: torch.device) -> Built:
    """The model, the model the steps call, the optimiser, the autocast context (§2)."""
    what = f"training {run.experiment.name} at preset {run.preset_name}"
    needed = TRAINING_COPIES * weight_bytes(run.model) + evaluation_logits_bytes(run)
    check_memory(what, needed, device)  # before allocating
    autocast = Kernels(precision(device), run.runtime.attention)
    m = run.model
    autocast.attention_kernel(m.n_head, m.block_size, m.head_size, device)  # one that can run
    check_loss_kernel(run.runtime.loss_kernel, device)
    model = make_model(run, device)
    optimizer = make_optimizer(model, run, fused_kernel=device.type == "cuda")
    # Static shapes: the train and eval micro-batches each get their own specialised graph.
    step_model = distributed.wrap(model, device)
    if run.runtime.enabled("compile", device.type):
        mode = None if run.runtime.compile_mode == "default" else run.runtime.compile_mode
        step_model = torch.compile(step_model, dynamic=False, mode=mode)
    return Built(model, step_model, optimizer, autocast)


def with_train_micro_batch(run: RunConfig, built: Built) -> RunConfig:
    """The run with runtime.train_micro_batch a number, the one place it is resolved: `auto` on a
    GPU the largest that fits, the same on every rank; else the evaluation's micro-batch."""
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


@dataclass(frozen=True)
class Schedule:
    """The learning rate at each step: linear warm-up, then until decay_steps either `cosine` from
    lr_max to lr_min, then lr_min (the paper's, docs/specification.md §2), or `linear` from lr_max
    to zero, then zero (decay to zero; lr_min unused)."""

    lr_max: float
    lr_min: float
    warmup_steps: int
    decay_steps: int
    kind: str  # "cosine" or "linear" (train.schedule)

    @classmethod
    def of(cls, run: RunConfig) -> "Schedule":
        o, t = run.optimizer, run.train
        return cls(o.lr_max, o.lr_min, t.warmup_steps, t.decay_steps, t.schedule)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr_max * (step + 1) / (self.warmup_steps + 1)
        if self.kind == "linear":
            span = self.decay_steps - self.warmup_steps
            return self.lr_max * max(self.decay_steps - step, 0) / span
        if step > self.decay_steps:
            return self.lr_min
        progress = (step - self.warmup_steps) / (self.decay_steps - self.warmup_steps)
        return self.lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (
            self.lr_max - self.lr_min
        )


def train_step(
    model,
    optimizer,
    batches: DeviceBatches,
    step: int,
    grad_clip: float,
    autocast,
) -> torch.Tensor:
    """One optimiser step over the accumulation micro-batches; the mean loss stays on the device
    (nothing here waits for it). Under torchrun DDP averages the ranks' shares (hence the scale)."""
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


def run_steps(
    run: RunConfig,
    built: Built,
    batches: Batches,
    log: StepLog,
    checkpoints: Checkpoints,
    record: RunRecord,
) -> RunRecord:
    """Steps log.start..max_step; the record as the run ended."""
    t, schedule = run.train, Schedule.of(run)
    model, step_model, optimizer, autocast = built
    device_batches = DeviceBatches(batches, next(model.parameters()).device)
    for step in range(log.start, t.max_step + 1):
        if distributed.any_rank(signals.requested()):  # the steps taken written, as at any
            # interval: a run that diverged in them ends so, any other resumes at this step
            if log.pending and (diverged := log.write()) is not None:
                return diverged_record(record, *diverged)
            checkpoints.save(step)
            return replace(record, last_step=step - 1)
        lr = schedule(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        evaluation = {}
        if step % t.eval_interval == 0:  # the model before this step's update, as the authors did
            eval_row = step // t.eval_interval  # the row of the evaluation indices
            evaluation = eval_losses(step_model, batches, eval_row, t.eval_batches, autocast)
        log.start_clock()
        loss = train_step(step_model, optimizer, device_batches, step, t.grad_clip, autocast)
        log.add(step, lr, evaluation, loss)
        checkpoint = checkpoints.due(step)
        # Write before a checkpoint too, so that metrics.csv holds every step it has taken.
        if log.due(step) or checkpoint:
            if (diverged := log.write()) is not None:
                return diverged_record(record, *diverged)
            record.last_step = step
        if checkpoint:
            checkpoints.save(step + 1)
    return replace(record, status="completed")


def diverged_record(record: RunRecord, step: int, reason: str) -> RunRecord:
    """The record of a run that diverged at `step`: its last row, never resumed."""
    return replace(
        record, status="diverged", diverged_step=step, diverged_reason=reason, last_step=step
    )
