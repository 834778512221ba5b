"""The authors' nanoGPT-derived checkpoints, read as our GPT computing the same function."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from repro.config import ModelConfig
from repro.model import GPT
from repro.training.checkpoints import FORMAT, CheckpointError, model_from, read_checkpoint
from repro.training.evaluation import check_finite, load_model

AUTHORS_QUERY_MODES = {
    "original": "linear",
    "identity": "identity",
    "residual": "residual_linear",
    "residual_gelu": "residual_gelu",
}
AUTHORS_RENAMES = {
    ".attn.residual_rmsnorm_input.": ".attn.query_mlp.norm_in.",
    ".attn.residual_in.": ".attn.query_mlp.fc_in.",
    ".attn.residual_out.": ".attn.query_mlp.fc_out.",
    ".attn.residual_layernorm_output.": ".attn.query_mlp.norm_out.",
}


AUTHORS_SIZES = ("n_layer", "num_heads", "n_embd", "mlp_hidden_size")  # model_args they always hold


def authors_model_config(model_args: dict, path: Path) -> ModelConfig:
    """Their `model_args` as ours: they fold x + f(x)'s 1/2 into `scale`, we scale q by it."""
    if not isinstance(model_args, Mapping):
        raise CheckpointError(f"{path}: model_args is a {type(model_args).__name__}, not a mapping")
    missing = [k for k in ("query_mode", *AUTHORS_SIZES) if k not in model_args]
    if missing:
        raise CheckpointError(f"{path}: model_args lack {', '.join(missing)}")
    for key in AUTHORS_SIZES:
        value = model_args[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CheckpointError(f"{path}: model_args {key} is {value!r}, not a positive integer")
    if model_args.get("bias", False):
        raise CheckpointError(f"{path}: bias=True; the paper's models have none")
    mode = model_args["query_mode"]
    if mode not in AUTHORS_QUERY_MODES:
        raise CheckpointError(
            f"{path}: unknown query_mode {mode!r} (known: {', '.join(AUTHORS_QUERY_MODES)})"
        )
    n_embd, n_head = model_args["n_embd"], model_args["num_heads"]
    head_size = n_embd // n_head
    scale = model_args.get("scale", 1 / math.sqrt(head_size))
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise CheckpointError(f"{path}: model_args scale is {scale!r}, not a positive number")
    return ModelConfig(
        n_layer=model_args["n_layer"],
        n_head=n_head,
        d_model=n_embd,
        block_size=model_args.get("block_size", 1024),
        vocab_size=model_args.get("vocab_size", 50304),
        mlp_hidden=model_args["mlp_hidden_size"],
        query_mode=AUTHORS_QUERY_MODES[mode],
        tie_embeddings=model_args.get("tie_weights", True),
        query_scale=scale * math.sqrt(head_size),
    )


def _our_key(key: str) -> str:
    key = key.removeprefix("_orig_mod.")  # torch.compile's wrapper prefix
    for theirs, ours in AUTHORS_RENAMES.items():
        key = key.replace(theirs, ours)
    return key


def load_any_checkpoint(path: Path) -> tuple[GPT, int, str]:
    """(model, step, "repro" or "authors") of a checkpoint in either format, its weights finite."""
    state = read_checkpoint(Path(path))
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a checkpoint (a {type(state).__name__})")
    if "model_args" not in state:
        if state.get("format") != FORMAT:
            raise CheckpointError(
                f"{path}: neither a repro checkpoint nor the authors' "
                f"(keys: {', '.join(sorted(map(str, state)))})"
            )
        return load_model(path, state)
    model = authors_model(state, path)  # the authors' train.py (docs/specification.md §8.1)
    check_finite(path, model)
    return model, authors_step(state, path), "authors"


def authors_model(state: dict, path: Path) -> GPT:
    config, weights = authors_model_config(state["model_args"], path), state.get("model")
    if isinstance(weights, Mapping):
        weights = {
            _our_key(str(k)): v for k, v in weights.items() if not str(k).endswith(".attn.bias")
        }  # the causal-mask buffer of their non-flash path
    return model_from(path, config, weights).eval()


def authors_step(state: dict, path: Path) -> int:
    step = state.get("iter_num")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"{path}: iter_num is {step!r}, not a step (an integer from 0)")
    return step
