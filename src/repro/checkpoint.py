"""Checkpoints: ours (model + optimiser + step, written atomically) and the authors' format."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from repro.config import ModelConfig
from repro.files import ReproError, atomic_write, free_bytes
from repro.model import GPT

FORMAT = "repro/1"


class CheckpointError(ReproError):
    """A checkpoint file that cannot be read or used; the message names it."""


def save_checkpoint(path: Path, model: GPT, optimizer, next_step: int, config: dict) -> None:
    """Write to a temporary name, then rename: an interrupted save never leaves a broken ckpt
    (and a failed one removes its partial file)."""
    state = {"format": FORMAT, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "step": next_step, "config": config}
    try:
        with atomic_write(path, "wb") as f:
            torch.save(state, f)
    except (RuntimeError, OSError) as e:  # a full disk is torch's RuntimeError "enforce fail"
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise CheckpointError(f"{path}: cannot be written ({reason}); {free_bytes(path.parent):,} "
                              f"bytes free, a checkpoint needs about "
                              f"{checkpoint_bytes(model):,}") from None


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
        raise CheckpointError(f"{path.parent}: {free:,} bytes free, its checkpoints need "
                              f"{needed:,} more; free space or train elsewhere (--out)")


def read_checkpoint(path: Path, map_location="cpu", mmap: bool = False) -> dict:
    """The state dict saved at `path`, whoever wrote it; an unreadable file is a CheckpointError.
    With mmap, tensors are read only when used (a 1.5 GB checkpoint read for its config)."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except Exception as e:  # torch's unpickler raises whatever the bytes lead it to (KeyError...)
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt: "
                              f"{reason})") from None


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    state = read_checkpoint(path, map_location)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"{path}: not a repro checkpoint (format {found!r})")
    return state


# The authors' nanoGPT-derived checkpoints (github.com/MarkoKarbevski/beyond_query_linearity).
AUTHORS_QUERY_MODES = {"original": "linear", "identity": "identity",
                       "residual": "residual_linear", "residual_gelu": "residual_gelu"}
AUTHORS_RENAMES = {
    ".attn.residual_rmsnorm_input.": ".attn.query_mlp.norm_in.",
    ".attn.residual_in.": ".attn.query_mlp.fc_in.",
    ".attn.residual_out.": ".attn.query_mlp.fc_out.",
    ".attn.residual_layernorm_output.": ".attn.query_mlp.norm_out.",
}


def authors_model_config(model_args: dict) -> ModelConfig:
    """Map the authors' `model_args` onto ours.

    Their residual modes compute q = x + f(x) and fold the 1/2 into the attention scale
    (`scale` = 1/(2 sqrt(head_size))); ours applies the scale to q, so query_scale =
    scale * sqrt(head_size), whatever the mode.
    """
    if model_args.get("bias", False):
        raise CheckpointError("authors' checkpoint has bias=True; the paper's models have none")
    mode = model_args["query_mode"]
    if mode not in AUTHORS_QUERY_MODES:
        raise CheckpointError(f"authors' checkpoint: unknown query_mode {mode!r} "
                              f"(known: {', '.join(AUTHORS_QUERY_MODES)})")
    n_embd, n_head = model_args["n_embd"], model_args["num_heads"]
    head_size = n_embd // n_head
    scale = model_args.get("scale", 1 / math.sqrt(head_size))
    return ModelConfig(n_layer=model_args["n_layer"], n_head=n_head, d_model=n_embd,
                       block_size=model_args.get("block_size", 1024),
                       vocab_size=model_args.get("vocab_size", 50304),
                       mlp_hidden=model_args["mlp_hidden_size"],
                       query_mode=AUTHORS_QUERY_MODES[mode],
                       tie_embeddings=model_args.get("tie_weights", True),
                       query_scale=scale * math.sqrt(head_size))


def _our_key(key: str) -> str:
    key = key.removeprefix("_orig_mod.")  # torch.compile's wrapper prefix
    for theirs, ours in AUTHORS_RENAMES.items():
        key = key.replace(theirs, ours)
    return key


def load_authors_checkpoint(path: Path, map_location="cpu") -> GPT:
    """A checkpoint in the authors' format -> our GPT in eval mode computing the same function."""
    return authors_model(read_checkpoint(path, map_location))


def authors_model(state: dict) -> GPT:
    """The model of a checkpoint state in the authors' format (keys `model`, `model_args`)."""
    model = GPT(authors_model_config(state["model_args"]))
    weights = {_our_key(k): v for k, v in state["model"].items()
               if not k.endswith(".attn.bias")}  # the causal-mask buffer of their non-flash path
    model.load_state_dict(weights)
    return model.eval()
