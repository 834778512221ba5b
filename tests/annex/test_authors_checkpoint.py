"""Reading the authors' nanoGPT-derived checkpoints.

They come from github.com/MarkoKarbevski/beyond_query_linearity."""

import math

import pytest
import torch
import torch.nn.functional as F

from repro.annex.authors.checkpoint import authors_model
from repro.training.checkpoints import read_checkpoint

D, HEADS, LAYERS, VOCAB, BLOCK, HIDDEN = 32, 4, 2, 50304, 16, 96


def authors_state(mode: str, tie: bool, generator) -> dict:
    """A random state dict with the authors' key names and shapes."""
    rand = lambda *shape: torch.randn(*shape, generator=generator) * 0.2
    ones = lambda n: 1 + rand(n)
    sd = {
        "transformer.wte.weight": rand(VOCAB, D),
        "transformer.wpe.weight": rand(BLOCK, D),
        "transformer.ln_f.weight": ones(D),
    }
    sd["lm_head.weight"] = sd["transformer.wte.weight"] if tie else rand(VOCAB, D)
    for i in range(LAYERS):
        h = f"transformer.h.{i}."
        sd |= {
            h + "ln_1.weight": ones(D),
            h + "ln_2.weight": ones(D),
            h + "attn.c_attn.weight": rand((3 if mode in ("original", "residual") else 2) * D, D),
            h + "attn.c_proj.weight": rand(D, D),
            h + "mlp.c_fc.weight": rand(HIDDEN, D),
            h + "mlp.c_proj.weight": rand(D, HIDDEN),
        }
        if mode == "residual_gelu":
            sd |= {
                h + "attn.residual_rmsnorm_input.weight": ones(D),
                h + "attn.residual_in.weight": rand(D // 2, D),
                h + "attn.residual_out.weight": rand(D, D // 2),
                h + "attn.residual_layernorm_output.weight": ones(D),
            }
    return sd


def authors_logits(sd: dict, mode: str, scale: float, idx: torch.Tensor) -> torch.Tensor:
    """The authors' forward pass, written out independently from their model.py's equations."""
    ln = lambda x, w: F.layer_norm(x, (D,), w, None, 1e-5)
    T = idx.shape[1]
    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:T]
    for i in range(LAYERS):
        w = {k.split(f"h.{i}.")[1]: v for k, v in sd.items() if f".h.{i}." in k}
        a = ln(x, w["ln_1.weight"])
        proj = a @ w["attn.c_attn.weight"].T
        if mode in ("original", "residual"):
            q, k, v = proj.split(D, -1)
            q = a + q if mode == "residual" else q
        else:
            k, v = proj.split(D, -1)
            q = a
            if mode == "residual_gelu":
                r = (
                    a
                    * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-5)
                    * w["attn.residual_rmsnorm_input.weight"]
                )
                f = F.gelu(r @ w["attn.residual_in.weight"].T) @ w["attn.residual_out.weight"].T
                q = a + ln(f, w["attn.residual_layernorm_output.weight"])
        heads = lambda t: t.view(1, T, HEADS, D // HEADS).transpose(1, 2)
        att = (heads(q) @ heads(k).transpose(-1, -2)) * scale
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        y = (att.softmax(-1) @ heads(v)).transpose(1, 2).reshape(1, T, D)
        x = x + y @ w["attn.c_proj.weight"].T
        m = ln(x, w["ln_2.weight"])
        x = x + F.gelu(m @ w["mlp.c_fc.weight"].T) @ w["mlp.c_proj.weight"].T
    return ln(x, sd["transformer.ln_f.weight"]) @ sd["lm_head.weight"].T


HALF = 1 / (2 * math.sqrt(D // HEADS))  # the authors' scale for the residual modes
CASES = [
    ("residual_gelu", True, HALF, True),
    ("original", True, 1 / math.sqrt(D // HEADS), False),
    ("residual", True, HALF, False),
    ("identity", False, HALF, True),
]


@pytest.mark.parametrize("mode,tie,scale,compiled_prefix", CASES)
def test_authors_checkpoint_gives_the_authors_logits(tmp_path, mode, tie, scale, compiled_prefix):
    generator = torch.Generator().manual_seed(7)
    sd = authors_state(mode, tie, generator)
    saved = {("_orig_mod." + k if compiled_prefix else k): v for k, v in sd.items()}
    model_args = {
        "query_mode": mode,
        "mlp_hidden_size": HIDDEN,
        "n_layer": LAYERS,
        "num_heads": HEADS,
        "n_embd": D,
        "scale": scale,
        "tie_weights": tie,
        "block_size": BLOCK,
        "vocab_size": VOCAB,
        "bias": False,
        "dropout": 0.0,
    }
    path = tmp_path / "ckpt.pt"
    torch.save(
        {
            "model": saved,
            "model_args": model_args,
            "iter_num": 60000,
            "best_val_loss": 2.9,
            "config": {"batch_size": 12},
        },
        path,
    )

    model = authors_model(read_checkpoint(path), path)
    assert not model.training
    idx = torch.randint(50257, (1, BLOCK), generator=generator)
    logits = model(idx)
    torch.testing.assert_close(
        logits, authors_logits(sd, mode, scale, idx)[None][0], rtol=1e-4, atol=1e-4
    )


def test_authors_checkpoint_with_unknown_mode_is_refused(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save(
        {
            "model": {},
            "model_args": {
                "query_mode": "mystery",
                "mlp_hidden_size": 8,
                "n_layer": 1,
                "num_heads": 1,
                "n_embd": 8,
            },
        },
        path,
    )
    with pytest.raises(ValueError, match="unknown query_mode 'mystery'"):
        authors_model(read_checkpoint(path), path)
