"""Our checkpoints: model + optimiser + step, written atomically, read with weights_only; and
a run's checkpoints, which know when they are due."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from repro.config import ModelConfig, RunConfig
from repro.errors import ReproError
from repro.files import WriteError, atomic_write, free_bytes, open_regular
from repro.model import GPT
from repro.rundir import CHECKPOINT

FORMAT = "repro/1"
CHECKPOINT_BYTES = 1 << 38  # 256 GiB: the large preset's weights and moments take about 9 GB


class CheckpointError(ReproError):
    """A checkpoint file that cannot be read or used; the message names it."""


def save_checkpoint(path: Path, model: GPT, optimizer, next_step: int, config: dict) -> None:
    """Write to a temporary name, then rename: an interrupted save never leaves a broken ckpt."""
    state = {
        "format": FORMAT,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": next_step,
        "config": config,
    }
    try:
        with atomic_write(path, "wb") as f:
            torch.save(state, f)
        return
    except RuntimeError as e:  # a full disk is torch's RuntimeError "enforce fail"
        reason = f"{path}: cannot be written ({(str(e) or 'RuntimeError').splitlines()[0]})"
    except WriteError as e:  # what the file system refused, the file named
        reason = str(e)
    raise CheckpointError(
        f"{reason}; {free_bytes(path.parent):,} bytes free, a checkpoint needs about "
        f"{checkpoint_bytes(model):,}"
    )


@dataclass
class Checkpoints:
    """A run's checkpoint, saved by the main process every `interval` steps and at the last."""

    path: Path
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    config: dict  # what a resume checks: the run's identity (its model among it)
    interval: int
    max_step: int
    writer: bool  # the main process: the one that writes the run's files

    @classmethod
    def of(cls, run: RunConfig, out_dir: Path, identity: dict, built, writer: bool):
        """The checkpoints in out_dir of `run`, of `identity` (run.json's), training `built`."""
        config = {"identity": identity}
        interval, max_step = run.runtime.checkpoint_interval, run.train.max_step
        model, optimizer = built.model, built.optimizer
        return cls(out_dir / CHECKPOINT, model, optimizer, config, interval, max_step, writer)

    def due(self, step: int) -> bool:
        return (step + 1) % self.interval == 0 or step == self.max_step

    def save(self, next_step: int) -> None:
        """The model and optimiser as they are before step `next_step`."""
        if self.writer:
            save_checkpoint(self.path, self.model, self.optimizer, next_step, self.config)


def checkpoint_bytes(model: GPT) -> int:
    """A checkpoint's size: the weights and AdamW's two moments of each parameter. A tensor held
    twice (the tied embedding and output layer) counts once, as torch.save writes it once."""
    tensors = model.state_dict().values()
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    moments = sum(2 * p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return sum(storages.values()) + moments


def check_checkpoint_space(path: Path, model: GPT) -> None:
    """Refuse to start unless two checkpoints fit next to `path` (ckpt.pt and its replacement),
    counting ckpt.pt and a killed writer's partial files (removed: the folder has one writer)."""
    for stale in path.parent.glob(f".{path.name}.*.partial"):
        stale.unlink(missing_ok=True)
    held = path.stat().st_size if path.exists() else 0
    needed = 2 * checkpoint_bytes(model) - held
    free = free_bytes(path.parent)
    if free < needed:
        raise CheckpointError(
            f"{path.parent}: {free:,} bytes free, its checkpoints need "
            f"{needed:,} more; free space or train elsewhere (--out)"
        )


def read_checkpoint(path: Path, map_location="cpu", mmap: bool = False) -> dict:
    """The state dict saved at `path`, whoever wrote it; an unreadable file is a CheckpointError.
    With mmap, tensors are read only when used (a 1.5 GB checkpoint read for its config)."""
    # a named pipe would block torch's read forever, a device never end it
    open_regular(path, CHECKPOINT_BYTES, CheckpointError, "a checkpoint").close()
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except Exception as e:  # torch's unpickler raises whatever the bytes lead it to (KeyError...)
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or corrupt: {reason})"
        ) from None


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    """A checkpoint of ours, with every entry save_checkpoint writes, of the right kind."""
    state = read_checkpoint(path, map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path}: not a repro checkpoint (format {found!r})")
    return check_state(path, state)


def check_state(path: Path, state: dict) -> dict:
    optimizer, config = state.get("optimizer"), state.get("config")
    step = state.get("step")
    for entry, valid in {
        "model (the weights)": isinstance(state.get("model"), Mapping),
        "optimizer (state and param_groups)": isinstance(optimizer, Mapping)
        and isinstance(optimizer.get("state"), Mapping)
        and isinstance(optimizer.get("param_groups"), list),
        "step (an integer from 0)": isinstance(step, int)
        and not isinstance(step, bool)
        and step >= 0,
        "config (the run's identity, with its model)": isinstance(config, Mapping)
        and isinstance(config.get("identity"), Mapping)
        and isinstance(config["identity"].get("model"), Mapping),
    }.items():
        if not valid:
            raise CheckpointError(f"{path}: a repro checkpoint without a valid {entry}")
    # the model is built from config.identity.model; a checkpoint of an earlier release holds it a
    # second time as config.model, which must then agree
    built, trained = config.get("model", config["identity"]["model"]), config["identity"]["model"]
    if not isinstance(built, Mapping) or built != trained:
        built = built if isinstance(built, Mapping) else {}
        keys = sorted(str(k) for k in set(built) | set(trained) if built.get(k) != trained.get(k))
        raise CheckpointError(
            f"{path}: its model configuration differs from the run's identity in "
            f"{', '.join(keys)} (edited or damaged)"
        )
    return state


def restore(path: Path, state: dict, model: GPT, optimizer) -> None:
    """Load a checkpoint's weights and optimiser state into a run's model and optimizer."""
    check_weights(path, state["model"], model.state_dict())
    model.load_state_dict(state["model"])
    parameters = len(list(model.parameters()))
    moments = len(state["optimizer"]["state"])
    if state["step"] > 0 and moments != parameters:  # AdamW has moments after its first step
        raise CheckpointError(
            f"{path}: optimizer state for {moments} of the model's {parameters} parameters "
            f"at step {state['step']}"
        )
    try:
        optimizer.load_state_dict(state["optimizer"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise CheckpointError(
            f"{path}: optimizer state does not fit the model ({reason})"
        ) from None


def check_weights(path: Path, weights, expected: Mapping) -> None:
    """Refuse weights that are not exactly the floating-point tensors of `expected`."""
    if not isinstance(weights, Mapping):
        raise CheckpointError(f"{path}: weights are a {type(weights).__name__}, not a mapping")
    missing, unexpected = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: weights do not match the model (missing: {', '.join(missing[:5]) or '-'}; "
            f"unexpected: {', '.join(map(str, unexpected[:5])) or '-'})"
        )
    for name, tensor in weights.items():
        if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
            kind = tensor.dtype if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise CheckpointError(f"{path}: weight {name} is {kind}, not floating-point")
        if tensor.shape != expected[name].shape:
            raise CheckpointError(
                f"{path}: weight {name} has shape {tuple(tensor.shape)}, the model's "
                f"{tuple(expected[name].shape)}"
            )


def model_from(path: Path, config: ModelConfig | dict, weights) -> GPT:
    """The GPT of `config` holding `weights`, checked on the meta device before any allocation."""
    try:
        if not isinstance(config, ModelConfig):
            config = ModelConfig(**config)
        with torch.device("meta"):
            expected = GPT(config).state_dict()
    except (TypeError, ValueError, ZeroDivisionError, RuntimeError, ReproError) as e:
        reason = (str(e) or type(e).__name__).splitlines()[0][:200]
        raise CheckpointError(
            f"{path}: its model configuration is not a model ({reason})"
        ) from None
    check_weights(path, weights, expected)
    model = GPT(config)
    model.load_state_dict(weights)
    return model
