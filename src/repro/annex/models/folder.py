"""What loading a transformers model folder checks before it builds anything: config.json's sizes
and settings, then the names, shapes and types of model.safetensors' tensors as its header states
them. A folder's sizes would otherwise decide how much is allocated (n_layer 10**6 hangs, a
vocabulary of 10**9 asks for 128 GB) and a GPT-2 of other settings would load as ours, computing
another function."""

from __future__ import annotations

from pathlib import Path

import torch

from repro.config.schema import validate
from repro.errors import ReproError
from repro.files import open_regular
from repro.model import GPT
from repro.training.checkpoints import CHECKPOINT_BYTES, check_weights

CONFIG_JSON, WEIGHTS = "config.json", "model.safetensors"
# GPT-2's Conv1D weights, (in, out): nn.Linear's transposed.
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# GPT-2's modules with a bias (its LayerNorms' and Conv1Ds'), which the package's model has none of.
GPT2_BIASED = (".ln_1", ".ln_2", ".ln_f", *("." + name.removesuffix(".weight") for name in CONV1D))
# What GPT2LMHeadModel computes beyond its sizes, as the package's model does it: (our value,
# transformers' when config.json has none). Another value is another function.
GPT2_SETTINGS = {
    "activation_function": ("gelu", "gelu_new"),  # exact GELU, as torch's F.gelu
    "layer_norm_epsilon": (1e-5, 1e-5),
    "scale_attn_weights": (True, True),
    "scale_attn_by_inverse_layer_idx": (False, False),
    "reorder_and_upcast_attn": (False, False),
    "add_cross_attention": (False, False),
}
# safetensors' names of the floating-point types a model's weights may be stored in.
FLOATS = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32, "F64": torch.float64}
TIED = ("transformer.wte.weight", "lm_head.weight")


def gpt2_fields(path: Path, config: dict) -> dict:
    """ModelConfig's fields of a GPT-2 config.json, refused where the package's model would
    compute another function than transformers' GPT2LMHeadModel."""
    validate(config, "gpt2_folder.schema.yaml", path)
    for key, (ours, default) in GPT2_SETTINGS.items():
        value = config.get(key, default)
        if type(value) is not type(ours) or value != ours:
            said = "" if key in config else f" (transformers' default, {CONFIG_JSON} has none)"
            raise ReproError(
                f"{path}: {key} {value!r}{said}: the package's model implements only {ours!r}"
            )
    return {
        "n_layer": config["n_layer"],
        "n_head": config["n_head"],
        "d_model": config["n_embd"],
        "block_size": config["n_positions"],
        "vocab_size": config["vocab_size"],
        "mlp_hidden": config.get("n_inner") or 4 * config["n_embd"],
        "tie_embeddings": config.get("tie_word_embeddings", True),
    }


def repro_fields(path: Path, config: dict, fields: tuple[str, ...]) -> dict:
    """ModelConfig's fields of a config.json the package wrote (model_type repro, or an earlier
    export's fields alone)."""
    validate(config, "repro_folder.schema.yaml", path)
    return {k: v for k, v in config.items() if k in fields}


def header_weights(path: Path) -> dict[str, torch.Tensor]:
    """model.safetensors' tensors as its header states them, on the meta device: nothing read."""
    from safetensors import safe_open

    open_regular(path, CHECKPOINT_BYTES, ReproError, "safetensors weights").close()  # no pipe
    try:
        with safe_open(path, framework="pt") as f:
            stated = {name: f.get_slice(name) for name in f.keys()}
            stated = {name: (s.get_dtype(), s.get_shape()) for name, s in stated.items()}
    except Exception as e:  # safetensors' own error, many lines long
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise ReproError(f"{path}: not safetensors weights ({reason})") from None
    for name, (dtype, _) in stated.items():
        if dtype not in FLOATS:
            raise ReproError(f"{path}: weight {name} is {dtype}, not floating-point")
    return {
        name: torch.empty(shape, dtype=FLOATS[dtype], device="meta")
        for name, (dtype, shape) in stated.items()
    }


def ours(weights: dict, kind: str | None) -> dict:
    """A folder's weights under the package's names and layouts (GPT-2's biases left out: zero,
    which load_model checks of the values). A bias GPT-2 has not (lm_head's, or one beside no
    weight) stays, for check_weights to refuse as unexpected, as transformers names it."""
    if kind == "repro":
        return {name.removeprefix("model."): tensor for name, tensor in weights.items()}
    if kind != "gpt2":
        return dict(weights)
    return {
        name: tensor.t() if name.endswith(CONV1D) else tensor
        for name, tensor in weights.items()
        if not is_gpt2_bias(name, weights)
    }


def is_gpt2_bias(name: str, weights: dict) -> bool:
    """Whether `name` is the bias of one of GPT-2's biased modules whose weight `weights` hold."""
    module = name.removesuffix(".bias")
    return module != name and module.endswith(GPT2_BIASED) and f"{module}.weight" in weights


def tied(weights: dict, tie_embeddings: bool) -> dict:
    """`weights` with the tied pair both named, where the file holds one of them (a tied model
    stores its embedding once)."""
    held = [name for name in TIED if name in weights]
    if tie_embeddings and len(held) == 1:
        return weights | dict.fromkeys(TIED, weights[held[0]])
    return weights


def check_tied(path: Path, weights: dict, tie_embeddings: bool, dtype: torch.dtype) -> None:
    """A tied model's embedding and output layer are one tensor: a file that holds both must hold
    it twice, equal in the model's `dtype` (else one of them would silently become the other)."""
    if not tie_embeddings or not all(name in weights for name in TIED):
        return
    embedding, head = (weights[name].to(dtype) for name in TIED)
    if not torch.equal(embedding, head):
        raise ReproError(
            f"{path}: {TIED[0]} and {TIED[1]} differ, but the model ties them (one tensor is "
            f"both): which one is meant is unknown"
        )


def check_header(path: Path, stated: dict, config) -> None:
    """Refuse weights other than the model of `config` has, by name, shape and type, before
    anything is allocated: the model is built on the meta device."""
    with torch.device("meta"):
        expected = GPT(config).state_dict()
    check_weights(path, tied(stated, config.tie_embeddings), expected)
