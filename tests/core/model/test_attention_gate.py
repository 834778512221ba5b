"""The attention gate (`model.attention_gate`: headwise or elementwise, docs/annex/ablation.md): its
formula by hand in float64 with every query mode and QK-norm, a model otherwise unchanged, its
parameters at the paper's size, its cached generation, and the identity of runs recorded without
it."""

import json
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from model_helpers import small, with_random_gains

from repro.config import QUERY_MODES, ConfigError, ModelConfig, load_run
from repro.model import KVCache, parameter_counts
from repro.rundir.history import with_later_defaults


def attention_by_hand(attn, x, gate=None):
    """Causal softmax attention of attn's q, k, v on x (B, T, d), each head's output times
    `gate` (B, T, n_head, 1 or head_size) when given, then the output projection."""
    B, T, d = x.shape
    H = attn.config.n_head
    q, k, v = (t.view(B, T, H, -1).transpose(1, 2) for t in attn.project(x))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // H)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    y = (F.softmax(scores, -1) @ v).transpose(1, 2)  # (B, T, H, head_size)
    if gate is not None:
        y = y * gate
    return y.reshape(B, T, d) @ attn.c_proj.weight.T


@pytest.mark.parametrize("mode", QUERY_MODES)
@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
def test_the_attention_gate_is_its_formula(mode, qk_norm, gate):
    """y_h <- y_h * sigmoid(x W_g) before the output projection, x the layer's normed input (the
    query's): one gate per head (W_g 32 x 4) or one per channel (32 x 32), by hand in float64,
    with every query mode and with QK-norm."""
    model = with_random_gains(small(mode, qk_norm=qk_norm, attention_gate=gate).double())
    attn = model.transformer.h[0].attn
    x = torch.randn(3, 6, 32, dtype=torch.float64)
    weight = attn.gate.weight
    assert weight.shape == ((4, 32) if gate == "headwise" else (32, 32))
    g = 1 / (1 + torch.exp(-(x @ weight.T)))
    g = g[..., None] if gate == "headwise" else g.view(3, 6, 4, 8)
    torch.testing.assert_close(attn(x), attention_by_hand(attn, x, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
def test_the_gate_changes_nothing_else_of_the_model(gate):
    """The gated model is the plain one plus one weight a layer: with the plain one's weights and
    a gate weight of zero (sigmoid(0) = 1/2 everywhere) its attention is the plain one's halved."""
    plain = small("residual_gelu").double()
    gated = small("residual_gelu", attention_gate=gate).double()
    assert set(gated.state_dict()) - set(plain.state_dict()) == {
        f"transformer.h.{i}.attn.gate.weight" for i in range(2)
    }
    gated.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():
        gated.transformer.h[0].attn.gate.weight.zero_()
    attn, reference = gated.transformer.h[0].attn, plain.transformer.h[0].attn
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    torch.testing.assert_close(attn(x), reference(x) / 2, rtol=1e-12, atol=1e-12)


def test_runs_recorded_without_the_gate_keep_their_identity():
    """Runs recorded without the option are read as ungated runs; a gated run is another run."""
    run = load_run("tiny", "baseline")
    assert run.model.attention_gate is None
    recorded = run.identity()
    del recorded["model"]["attention_gate"]
    assert with_later_defaults(recorded) == run.identity()
    gated = replace(run, model=replace(run.model, attention_gate="elementwise"))
    assert gated.identity()["model"]["attention_gate"] == "elementwise"


def test_an_unknown_gate_is_refused_by_name():
    with pytest.raises(ConfigError, match="attention_gate 'channel': headwise or elementwise"):
        ModelConfig(attention_gate="channel")


def test_the_elementwise_gate_moves_w_q_to_a_gate_at_the_paper_size():
    """Elementwise: d^2 = 589,824 a layer; headwise: d x heads = 9,216; the identity query with
    the elementwise gate has exactly the linear baseline's parameters (W_Q's d^2 moved)."""
    paper = load_run("paper", "baseline").model
    counts = {
        (mode, gate): parameter_counts(replace(paper, query_mode=mode, attention_gate=gate))
        for mode in ("linear", "identity")
        for gate in (None, "headwise", "elementwise")
    }
    assert counts["linear", "elementwise"]["gate_params"] == 12 * 768 * 768
    assert counts["linear", "headwise"]["gate_params"] == 12 * 768 * 12
    assert counts["linear", None]["gate_params"] == 0
    base = counts["linear", None]["non_embedding_params"]
    for gate, added in (("headwise", 12 * 768 * 12), ("elementwise", 12 * 768 * 768)):
        assert counts["linear", gate]["non_embedding_params"] == base + added
    assert counts["identity", "elementwise"]["non_embedding_params"] == base == 84_953_856


@pytest.mark.parametrize("gate", ["headwise", "elementwise"])
def test_a_gated_model_generates_with_its_cache_as_without(gate):
    """The cached forward of a new token gates it from its own x, as the whole forward does."""
    model = small("residual_gelu", attention_gate=gate).double().eval()
    idx = torch.randint(50257, (1, 10))
    cache = KVCache(2, 16)
    model(idx[:, :6], cache=cache)
    step = model(idx[:, 6:], cache=cache)
    torch.testing.assert_close(step, model(idx)[:, 6:], rtol=1e-10, atol=1e-10)


def test_describe_reports_the_gates_parameters(capsys):
    from repro.cli.assembly import main

    args = ["describe", "--preset", "paper", "--experiment", "identity-gate-elementwise"]
    assert main(args) == 0
    assert "(gate 7,077,888)" in capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert (described["gate_params"], described["non_embedding_params"]) == (7_077_888, 84_953_856)
