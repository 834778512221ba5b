"""Our checkpoints: model + optimiser + step, written atomically, read with weights_only."""

from __future__ import annotations

from pathlib import Path

import torch

from repro.errors import ReproError
from repro.files import atomic_write, free_bytes
from repro.model import GPT

FORMAT = "repro/1"


class CheckpointError(ReproError):
    """A checkpoint file that cannot be read or used; the message names it."""


def save_checkpoint(path: Path, model: GPT, optimizer, next_step: int, config: dict) -> None:
    """Write to a temporary name, then rename: an interrupted save never leaves a broken ckpt
    (and a failed one removes its partial file)."""
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
    except (RuntimeError, OSError) as e:  # a full disk is torch's RuntimeError "enforce fail"
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise CheckpointError(
            f"{path}: cannot be written ({reason}); {free_bytes(path.parent):,} "
            f"bytes free, a checkpoint needs about "
            f"{checkpoint_bytes(model):,}"
        ) from None


def checkpoint_bytes(model: GPT) -> int:
    """A checkpoint's size: the weights and AdamW's two moments, each the weights' size."""
    return 3 * sum(t.numel() * t.element_size() for t in model.state_dict().values())


def check_checkpoint_space(path: Path, model: GPT) -> None:
    """Refuse to start unless two checkpoints fit next to `path` (ckpt.pt and the .partial that
    replaces it); the space the current files take is counted as free."""
    partial = path.with_name(path.name + ".partial")
    held = sum(p.stat().st_size for p in (path, partial) if p.exists())
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
    state = read_checkpoint(path, map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path}: not a repro checkpoint (format {found!r})")
    return state
