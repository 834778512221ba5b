"""A model as a transformers model folder, and back (docs/models.md, "Export and loading")."""

from __future__ import annotations

import os
from dataclasses import asdict, fields
from pathlib import Path

import torch

from repro.annex.models.folder import (
    CONFIG_JSON,
    CONV1D,
    WEIGHTS,
    check_header,
    check_tied,
    gpt2_fields,
    header_weights,
    ours,
    repro_fields,
    tied,
)
from repro.config import ModelConfig
from repro.data.tokenizer import EOT_TOKEN, bundled_data_dir, gpt2_encoding
from repro.errors import ReproError
from repro.files import WriteError, atomic_folder, read_json
from repro.model import GPT
from repro.training.evaluation import check_finite

# config.json's key naming the package's export format (1, the earlier, lacks it).
MARKER, FORMAT = "repro_export", 2
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
    """The package's GPT of an exported folder, on the CPU, in eval mode; config.json and the
    weights' header are checked before anything is built (repro.annex.models.folder)."""
    directory = Path(directory)
    path, kind = directory / CONFIG_JSON, None
    config = read_json(path)
    if isinstance(config, dict):
        kind = config.get("model_type")
    if kind not in ("gpt2", "repro", None):
        raise ReproError(f"{path}: model_type {kind!r}, not gpt2 or repro")
    model_config = _model_config(path, config, kind)
    weights_path = directory / WEIGHTS
    check_header(weights_path, ours(header_weights(weights_path), kind), model_config)
    weights = _read_weights(weights_path, kind)
    model = GPT(model_config)
    check_tied(weights_path, weights, model_config.tie_embeddings, model.lm_head.weight.dtype)
    model.load_state_dict(tied(weights, model_config.tie_embeddings))
    check_finite(weights_path, model)  # as a checkpoint's: a diverged model is refused
    return model.eval()


def _model_config(path: Path, config, kind: str | None) -> ModelConfig:
    if kind is None and isinstance(config, dict):  # an earlier export: ModelConfig's fields alone
        unknown = set(config) - set(MODEL_FIELDS)
        if unknown:
            raise ReproError(
                f"{path}: not a model configuration (unknown keys: {', '.join(sorted(unknown))})"
            )
    if kind == "gpt2":
        fields = gpt2_fields(path, config)
    else:
        fields = repro_fields(path, config, MODEL_FIELDS)
    try:
        return ModelConfig(**fields)
    except (TypeError, ValueError) as e:
        raise ReproError(f"{path}: not a model configuration ({e})") from None


def _read_weights(path: Path, kind: str | None) -> dict:
    """The weights under the package's names; a GPT-2's biases must be zero (it has none)."""
    import safetensors.torch  # only exported models need it: training runs on nodes without it

    try:
        weights = safetensors.torch.load_file(path)
    except Exception as e:  # safetensors' own error, many lines long
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise ReproError(f"{path}: not safetensors weights ({reason})") from None
    for name, tensor in weights.items():
        if kind == "gpt2" and name.endswith(".bias") and tensor.any():
            raise ReproError(
                f"{path}: {name} is not zero: a GPT-2 with biases, which repro's model has none of"
            )
    return {name: tensor.contiguous() for name, tensor in ours(weights, kind).items()}
