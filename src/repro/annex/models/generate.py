"""`repro generate`: text sampled from a checkpoint (docs/models.md, "Sampling text")."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from repro.annex.authors.checkpoint import load_any_checkpoint
from repro.data.tokenizer import EOT_TOKEN, gpt2_encoding
from repro.errors import ReproError
from repro.runtime.device import resolve_device

# Past the block size a longer text shows nothing more of the model.
MAX_NEW_TOKENS = 100_000


def check_sampling(max_new_tokens: int, temperature: float, top_k: int | None) -> None:
    if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ReproError(f"--max-new-tokens: {max_new_tokens}, from 1 to {MAX_NEW_TOKENS:,}")
    if not 0 <= temperature < math.inf:  # nan too
        raise ReproError(
            f"--temperature: {temperature}, a finite number from 0 (0: the most likely token)"
        )
    if top_k is not None and top_k < 1:
        raise ReproError(f"--top-k: {top_k}, at least 1")


def generate_text(
    checkpoint: Path,
    prompt: str,
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    device: str = "auto",
) -> dict:
    """The text that follows `prompt` (from <|endoftext|> when empty)."""
    check_sampling(max_new_tokens, temperature, top_k)
    model, step, kind = load_any_checkpoint(checkpoint)
    encoding = gpt2_encoding()
    tokens = encoding.encode_ordinary(prompt) or [EOT_TOKEN]
    dev = resolve_device(device)
    model = model.to(dev)
    generator = torch.Generator(dev).manual_seed(seed)
    idx = torch.tensor([tokens], device=dev)
    new = model.generate(idx, max_new_tokens, temperature, top_k, generator, vocab=encoding.n_vocab)
    return {
        "checkpoint": str(checkpoint),
        "format": kind,
        "step": step,
        "prompt": prompt,
        "text": encoding.decode(new[0].tolist()),
        "tokens": new[0].tolist(),
        "seed": seed,
        "temperature": temperature,
        "top_k": top_k,
        "device": str(dev),
    }
