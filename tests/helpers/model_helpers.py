"""Small models for the float64 checks of the model's formulas: two layers of four heads at width
32, seeded, with norm gains that show a skipped or misplaced gain."""

import torch

from repro.config import ModelConfig
from repro.model import GPT


def small(mode, seed=0, **kw):
    """A two-layer model of `mode` queries at width 32, seeded `seed`, with ModelConfig `kw`."""
    torch.manual_seed(seed)
    return GPT(
        ModelConfig(
            n_layer=2,
            n_head=4,
            d_model=32,
            block_size=16,
            vocab_size=50304,
            mlp_hidden=128,
            query_mode=mode,
            **kw,
        )
    )


def rms_norm(t, gain):
    """RMSNorm by its formula, eps 1e-5 as the model's."""
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-5) * gain


def with_random_gains(model):
    """Non-trivial norm gains, so that a skipped or misplaced gain would show."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    return model
