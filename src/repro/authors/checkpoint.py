"""The authors' nanoGPT-derived checkpoints (github.com/MarkoKarbevski/beyond_query_linearity),
read as our GPT computing the same function."""

from __future__ import annotations

import math

from repro.checkpoint import CheckpointError
from repro.config import ModelConfig
from repro.model import GPT

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
        raise CheckpointError(
            f"authors' checkpoint: unknown query_mode {mode!r} "
            f"(known: {', '.join(AUTHORS_QUERY_MODES)})"
        )
    n_embd, n_head = model_args["n_embd"], model_args["num_heads"]
    head_size = n_embd // n_head
    scale = model_args.get("scale", 1 / math.sqrt(head_size))
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


def authors_model(state: dict) -> GPT:
    """The model of a checkpoint state in the authors' format (keys `model`, `model_args`)."""
    model = GPT(authors_model_config(state["model_args"]))
    weights = {
        _our_key(k): v for k, v in state["model"].items() if not k.endswith(".attn.bias")
    }  # the causal-mask buffer of their non-flash path
    model.load_state_dict(weights)
    return model.eval()
