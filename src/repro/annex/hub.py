"""A model as a transformers model folder, and back (docs/models.md, "Export and loading")."""

from __future__ import annotations

import os
from dataclasses import asdict, fields
from pathlib import Path

import torch

from repro.config import ModelConfig
from repro.data.tokenizer import EOT_TOKEN, bundled_data_dir, gpt2_encoding
from repro.errors import ReproError
from repro.files import WriteError, atomic_folder, read_json
from repro.model import GPT

CONFIG_JSON, WEIGHTS = "config.json", "model.safetensors"
# config.json's key naming the package's export format (1, the earlier, lacks it).
MARKER, FORMAT = "repro_export", 2
# GPT-2's Conv1D weights, (in, out): nn.Linear's transposed.
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
MODEL_FIELDS = tuple(f.name for f in fields(ModelConfig))


def is_gpt2(config: ModelConfig) -> bool:
    """Whether the model is GPT-2's network: a plain GPT2LMHeadModel."""
    return (
        config.query_mode == "linear"
        and config.resolved_query_scale == 1.0
        and not config.qk_norm
        and config.attention_gate is None
    )


def to_transformers(model: GPT):
    config = model.config
    if not is_gpt2(config):
        from repro.modeling_repro import ReproConfig, ReproForCausalLM

        hf = ReproForCausalLM(ReproConfig(**asdict(config)))
        hf.model.load_state_dict(model.state_dict())
        return hf
    from transformers import GPT2Config, GPT2LMHeadModel

    hf = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=config.vocab_size,
            n_positions=config.block_size,
            n_embd=config.d_model,
            n_layer=config.n_layer,
            n_head=config.n_head,
            n_inner=config.mlp_hidden,
            activation_function="gelu",  # exact, as torch's F.gelu (GPT-2's own is tanh's)
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            layer_norm_epsilon=1e-5,
            bos_token_id=EOT_TOKEN,
            eos_token_id=EOT_TOKEN,
            tie_word_embeddings=config.tie_embeddings,
        )
    )
    ours = model.state_dict()
    theirs = {
        name: (ours[name].t() if name.endswith(CONV1D) else ours[name])
        if name in ours
        else torch.zeros_like(tensor)  # a bias, which repro's model has none of
        for name, tensor in hf.state_dict().items()
    }
    hf.load_state_dict(theirs)
    return hf


def generation_config(config: ModelConfig):
    """Sampling never draws the embedding's padding rows (ids from 50,257), as `repro generate`."""
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=EOT_TOKEN,
        eos_token_id=EOT_TOKEN,
        pad_token_id=EOT_TOKEN,
        suppress_tokens=list(range(EOT_TOKEN + 1, config.vocab_size)) or None,
        use_cache=is_gpt2(config),  # ReproForCausalLM keeps no cache
    )


def save_tokenizer(folder: Path, block_size: int) -> None:
    """GPT-2's tokenizer files, from the package's verified BPE files."""
    from transformers import GPT2TokenizerFast

    gpt2_encoding()  # checks the files against tiktoken's pinned hashes
    data = bundled_data_dir()
    tokenizer = GPT2TokenizerFast(
        vocab=str(data / "encoder.json"),
        merges=str(data / "vocab.bpe"),
        model_max_length=block_size,
    )
    tokenizer.save_pretrained(folder)


def write_model(model: GPT, folder: Path) -> None:
    hf = to_transformers(model)
    setattr(hf.config, MARKER, FORMAT)
    hf.generation_config = generation_config(model.config)
    if not is_gpt2(model.config):
        hf.config.register_for_auto_class()
        hf.register_for_auto_class("AutoModelForCausalLM")
    from safetensors import SafetensorError
    from transformers.utils import logging

    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # a bar for the one file of a small model says nothing
    try:
        hf.save_pretrained(folder)
        save_tokenizer(folder, model.config.block_size)
    except (OSError, SafetensorError) as e:  # a full disk among them
        reason = getattr(e, "strerror", None) or str(e).splitlines()[0]
        raise WriteError(f"{folder}: cannot be written ({reason})") from None
    finally:
        if shown:
            logging.enable_progress_bar()


def save_model(model: GPT, directory: str | os.PathLike) -> None:
    """`model` as a transformers model in `directory`, written whole or not at all."""
    with atomic_folder(directory) as folder:
        write_model(model, folder)


def load_model(directory: str | os.PathLike) -> GPT:
    """The package's GPT of an exported folder, on the CPU, in eval mode."""
    import safetensors.torch  # only exported models need it: training runs on nodes without it

    directory = Path(directory)
    config = read_json(directory / CONFIG_JSON)
    if not (directory / WEIGHTS).exists():
        raise ReproError(f"{directory / WEIGHTS}: no such file")
    try:
        weights = safetensors.torch.load_file(directory / WEIGHTS)
    except Exception as e:  # safetensors' own error, many lines long
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise ReproError(f"{directory / WEIGHTS}: not safetensors weights ({reason})") from None
    kind = config.get("model_type") if isinstance(config, dict) else None
    if kind == "gpt2":
        config, weights = from_gpt2(directory, config, weights)
    elif kind == "repro":
        weights = {name.removeprefix("model."): tensor for name, tensor in weights.items()}
    elif kind is not None:
        raise ReproError(f"{directory / CONFIG_JSON}: model_type {kind!r}, not gpt2 or repro")
    return _build(directory, config, weights).eval()


def from_gpt2(directory: Path, config: dict, weights: dict) -> tuple[dict, dict]:
    for name, tensor in weights.items():
        if name.endswith(".bias") and tensor.any():
            raise ReproError(
                f"{directory / WEIGHTS}: {name} is not zero: a GPT-2 with biases, which "
                "repro's model has none of"
            )
    fields = {
        "n_layer": config.get("n_layer"),
        "n_head": config.get("n_head"),
        "d_model": config.get("n_embd"),
        "block_size": config.get("n_positions"),
        "vocab_size": config.get("vocab_size"),
        "mlp_hidden": config.get("n_inner") or 4 * config.get("n_embd", 0),
        "tie_embeddings": config.get("tie_word_embeddings", True),
    }
    weights = {
        name: tensor.t().contiguous() if name.endswith(CONV1D) else tensor
        for name, tensor in weights.items()
        if not name.endswith(".bias")
    }
    return fields, weights


def _build(directory: Path, config: dict, weights: dict) -> GPT:
    unknown = set(config) - set(MODEL_FIELDS)
    if "model_type" not in config and unknown:  # an earlier export: ModelConfig's fields alone
        raise ReproError(
            f"{directory / CONFIG_JSON}: not a model configuration (unknown keys: "
            f"{', '.join(sorted(unknown))})"
        )
    try:
        model = GPT(ModelConfig(**{k: v for k, v in config.items() if k in MODEL_FIELDS}))
    except (TypeError, ValueError) as e:
        raise ReproError(f"{directory / CONFIG_JSON}: not a model configuration ({e})") from None
    tied = {"lm_head.weight", "transformer.wte.weight"} if model.config.tie_embeddings else set()
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - tied or len(set(missing)) > 1:
        names = ", ".join((list(missing) + list(unexpected))[:3])
        raise ReproError(
            f"{directory / WEIGHTS}: not the weights of {CONFIG_JSON}'s model ({names})"
        )
    return model
