"""Evaluation on the fixed evaluation sequences: the losses training computes at its evaluation
steps, and `repro evaluate` of one checkpoint exactly as training computes them, ours or another
format that its reader (`load`, e.g. repro.annex.authors.checkpoint's) converts into our model.

A checkpoint's step is often no evaluation step (the final one is max_step + 1), so by default it is
evaluated on the sequences of its last evaluation step at or before its own, and the result says
which.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from repro.config import Preset
from repro.data.batches import Batches
from repro.model import GPT
from repro.runtime import distributed
from repro.runtime.device import check_memory, precision, resolve_device
from repro.training.checkpoints import CheckpointError, check_state, load_checkpoint, model_from


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


def load_model(path: Path, state: dict | None = None) -> tuple[GPT, int, str]:
    """(model, its step, "repro") of a checkpoint of ours, its weights finite."""
    state = load_checkpoint(Path(path)) if state is None else check_state(path, state)
    model = model_from(path, state["config"]["identity"]["model"], state["model"])
    check_finite(path, model)
    return model.eval(), state["step"], "repro"


def check_finite(path: Path, model: GPT) -> None:
    """Refuse a model with a NaN or infinite weight: its losses would be NaN."""
    for name, weight in model.state_dict().items():
        if not torch.isfinite(weight).all():
            raise CheckpointError(
                f"{path}: weight {name} holds NaN or infinite values (the model diverged)"
            )


def last_evaluation_step(step: int, preset: Preset) -> int:
    return step - step % preset.train.eval_interval


def evaluation_row(step: int, preset: Preset) -> int:
    """The row of the evaluation index arrays that training reads at `step`."""
    t = preset.train
    if step % t.eval_interval:
        raise CheckpointError(
            f"step {step} is not an evaluation step of preset {preset.name} "
            f"(every {t.eval_interval}); give --step"
        )
    row = step // t.eval_interval
    if not 0 <= row < t.eval_rows:
        raise CheckpointError(
            f"step {step}: evaluation row {row} is outside the "
            f"{t.eval_rows} rows of preset {preset.name}"
        )
    return row


def evaluate(
    checkpoint: Path,
    preset: Preset,
    data_dir: Path,
    indices_dir: Path,
    step: int | None = None,
    device: str = "auto",
    load=load_model,
) -> dict:
    """The evaluation losses of `checkpoint` at `step` (default: its own), as training's."""
    model, own_step, kind = load(checkpoint)
    if model.config.block_size != preset.model.block_size:
        raise CheckpointError(
            f"{checkpoint}: block_size {model.config.block_size}, but preset "
            f"{preset.name} evaluates sequences of {preset.model.block_size}"
        )
    step = last_evaluation_step(own_step, preset) if step is None else step
    row = evaluation_row(step, preset)
    batches = Batches.open(data_dir, indices_dir, preset)
    dev = resolve_device(device)
    check_memory(f"evaluating {checkpoint}", evaluation_logits_bytes(preset), dev)
    autocast = precision(dev)
    model = model.to(dev)
    model.fuse_projections(preset.runtime.enabled("fused_projection", dev.type))  # as training
    losses = eval_losses(model, batches, row, preset.train.eval_batches, autocast)
    means = {k: v for k, v in losses.items() if k.endswith("_loss")}
    if not all(map(math.isfinite, means.values())):
        raise CheckpointError(
            f"{checkpoint}: its losses on the evaluation sequences of step {step} are not finite "
            f"({', '.join(f'{k} {v}' for k, v in means.items())}): the model overflows"
        )
    return {
        "checkpoint": str(checkpoint),
        "format": kind,
        "step": step,
        "row": row,
        "checkpoint_step": own_step,
        "micro_batches": preset.train.eval_batches,
        "device": str(dev),
        "precision": "bf16 autocast" if dev.type == "cuda" else "fp32",
        **losses,
    }


def format_result(result: dict) -> str:
    """Two lines: the losses, and how they relate to the losses training logged."""
    return (
        f"{result['checkpoint']} ({result['format']}) on the evaluation sequences of step "
        f"{result['step']:,}: eval train {result['eval_train_loss']:.4f} ± "
        f"{result['eval_train_std']:.4f}, val {result['eval_val_loss']:.4f} ± "
        f"{result['eval_val_std']:.4f} ({result['micro_batches']} micro-batches, "
        f"{result['device']}, {result['precision']})\n{relation_to_logged(result)}"
    )


def relation_to_logged(result: dict) -> str:
    """Whether training's logged evaluation at the step evaluated saw this checkpoint's model."""
    steps, step = result["checkpoint_step"], result["step"]
    model = f"the checkpoint's model has taken {steps:,} optimiser step{'s' * (steps != 1)}"
    if steps == step:
        return (
            f"{model}: the model training evaluated at step {step:,}, so these are the losses "
            f"it logged there (up to rounding, evaluated on the kind of device it trained on)"
        )
    return (
        f"{model}; training's logged evaluation at step {step:,} saw the model after {step:,} "
        f"steps, so these losses differ from the logged ones (give --step to choose another "
        f"step's sequences)"
    )
