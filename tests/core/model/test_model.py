"""The model and its query projections (docs/specification.md §1)."""

import math
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from model_helpers import rms_norm, small, with_random_gains

from repro.config import QUERY_MODES, ModelConfig, load_run
from repro.model import GPT, count_parameters, parameter_counts

# §1: exact non-embedding parameter counts of the paper-size models.
PAPER_NON_EMBEDDING = {
    "baseline": 84_953_856,
    "mlp4.75": 95_570_688,
    "resgelu-lr3e-3": 84_972_288,
    "identity": 77_875_968,
    "mlp4.33": 89_672_448,
}


@pytest.mark.parametrize("experiment,expected", PAPER_NON_EMBEDDING.items())
def test_paper_non_embedding_parameters(experiment, expected):
    config = load_run("paper", experiment).model
    counts = parameter_counts(config)  # the model's own counts: the test below
    assert counts["non_embedding_params"] == expected
    assert counts["total_params"] == expected + 50304 * 768 + 1024 * 768  # tied: wte counted once


@pytest.mark.parametrize("experiment", ["baseline", "resgelu-lr3e-3", "mlp4.75", "identity"])
@pytest.mark.parametrize("qk_norm", [False, True])
@pytest.mark.parametrize("gate", [None, "headwise", "elementwise"])
def test_parameter_counts_without_allocating_are_those_of_the_model(experiment, qk_norm, gate):
    config = replace(load_run("tiny", experiment).model, qk_norm=qk_norm, attention_gate=gate)
    assert parameter_counts(config) == count_parameters(GPT(config))  # built on the CPU


def test_sizing_a_model_imports_no_compiler():
    """The size every `repro train` checks before allocating costs no torch._dynamo import."""
    code = (
        "import sys; from repro.config import load_run; from repro.model import parameter_counts;"
        "parameter_counts(load_run('large', 'resgelu-lr3e-3').model);"
        "assert 'torch._dynamo' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mlp_hidden_is_rounded_down_like_the_authors():
    # §1: h = int(768 * 4.75) = 3648, int(768 * (4 + 1/3)) = 3328
    assert load_run("paper", "mlp4.75").model.mlp_hidden == 3648
    assert load_run("paper", "mlp4.33").model.mlp_hidden == 3328


@pytest.mark.parametrize("mode", ["residual_gelu", "residual_bottleneck_linear"])
def test_bottleneck_queries_are_their_equations(mode):
    """q = (x + f(x)) / 2, f(x) = LN(GELU(RMSNorm(x) W1) W2), r = d/2 (eq. 2-3), by hand, in
    float64; residual_bottleneck_linear is the same without the GELU."""
    attn = with_random_gains(small(mode).double()).transformer.h[0].attn
    x = torch.randn(3, 5, 32, dtype=torch.float64)
    mlp = attn.query_mlp
    assert mlp.fc_in.weight.shape == (16, 32) and mlp.fc_out.weight.shape == (32, 16)
    h = rms_norm(x, mlp.norm_in.weight) @ mlp.fc_in.weight.T
    if mode == "residual_gelu":
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU
    z = h @ mlp.fc_out.weight.T
    ln = (z - z.mean(-1, keepdim=True)) / torch.sqrt(z.var(-1, unbiased=False, keepdim=True) + 1e-5)
    f = ln * mlp.norm_out.weight
    expected_q = (x + f) / 2
    q, k, v = attn.project(x)
    torch.testing.assert_close(q, expected_q, rtol=1e-12, atol=1e-12)
    kv = x @ attn.c_attn.weight.T
    torch.testing.assert_close(torch.cat([k, v], -1), kv, rtol=1e-12, atol=1e-12)


def test_the_bottleneck_without_gelu_has_the_papers_parameters_and_init():
    """Residual_gelu's parameter count at the paper's size, and its initial weights."""
    config = load_run("paper", "resgelu-lr3e-3").model
    counts = [
        parameter_counts(replace(config, query_mode=mode))
        for mode in ("residual_gelu", "residual_bottleneck_linear")
    ]
    assert counts[0] == counts[1]
    gelu, linear = small("residual_gelu"), small("residual_bottleneck_linear")
    for (name, a), (other, b) in zip(gelu.named_parameters(), linear.named_parameters()):
        assert name == other and torch.equal(a, b)


@pytest.mark.parametrize("mode", QUERY_MODES)
def test_qk_norm_normalises_each_heads_queries_and_keys(mode):
    """q_h = RMSNorm(q_h) g_q times the query scale, k_h = RMSNorm(k_h) g_k, per head of 8, by
    hand in float64 from the same model without the option; v untouched."""
    plain = small(mode).double()
    normed = small(mode, qk_norm=True).double()
    with_random_gains(normed)
    plain.load_state_dict(normed.state_dict(), strict=False)  # every weight but the two gains
    attn, reference = normed.transformer.h[0].attn, plain.transformer.h[0].attn
    x = torch.randn(3, 5, 32, dtype=torch.float64)
    q0, k0, v0 = reference.project(x)
    scale = normed.config.resolved_query_scale
    per_head = lambda t, gain: rms_norm(t.unflatten(-1, (4, 8)), gain).flatten(-2)
    q, k, v = attn.project(x)
    torch.testing.assert_close(q, per_head(q0 / scale, attn.q_norm.weight) * scale)
    torch.testing.assert_close(k, per_head(k0, attn.k_norm.weight))
    torch.testing.assert_close(v, v0, rtol=0, atol=0)


def test_qk_norm_adds_two_gains_of_a_head_per_layer():
    config = load_run("paper", "baseline").model
    plain, normed = (
        parameter_counts(replace(config, qk_norm=on))["non_embedding_params"]
        for on in (False, True)
    )
    assert normed - plain == 12 * 2 * 64


@pytest.mark.parametrize(
    "mode,qkv_out",
    [
        ("linear", 96),
        ("residual_linear", 96),
        ("identity", 64),
        ("residual_gelu", 64),
        ("residual_bottleneck_linear", 64),
    ],
)
def test_query_modes(mode, qkv_out):
    model = small(mode)
    attn = model.transformer.h[0].attn
    assert attn.c_attn.weight.shape == (qkv_out, 32)
    x = torch.randn(2, 4, 32)
    q, k, v = attn.project(x)
    wq = attn.c_attn.weight[:32]
    expected = {"linear": x @ wq.T, "residual_linear": (x + x @ wq.T) / 2, "identity": x}.get(mode)
    if expected is not None:
        torch.testing.assert_close(q, expected)


def test_attention_is_causal_with_standard_scale():
    model = small("identity")
    attn = model.transformer.h[0].attn
    x = torch.randn(1, 6, 32)
    q, k, v = (t.view(1, 6, 4, 8).transpose(1, 2) for t in attn.project(x))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(8)
    scores = scores.masked_fill(torch.triu(torch.ones(6, 6, dtype=torch.bool), 1), float("-inf"))
    y = (F.softmax(scores, -1) @ v).transpose(1, 2).reshape(1, 6, 32) @ attn.c_proj.weight.T
    torch.testing.assert_close(attn(x), y)


def test_init_follows_spec():
    """N(0, 0.02), residual output projections N(0, 0.02/sqrt(2L)), query MLP plain (§1)."""
    torch.manual_seed(1337)
    model = GPT(
        ModelConfig(
            n_layer=4,
            n_head=4,
            d_model=256,
            block_size=64,
            mlp_hidden=1024,
            query_mode="residual_gelu",
        )
    )
    block = model.transformer.h[0]
    assert block.attn.c_attn.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert block.attn.query_mlp.fc_out.weight.std().item() == pytest.approx(0.02, rel=0.05)
    for proj in (block.attn.c_proj, block.mlp.c_proj):
        assert proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(8), rel=0.05)
    assert model.lm_head.weight is model.transformer.wte.weight
    assert all(
        not hasattr(m, "bias") or m.bias is None
        for m in model.modules()
        if isinstance(m, (torch.nn.Linear, torch.nn.LayerNorm))
    )


def test_forward_gives_logits_for_every_position_or_the_mean_loss():
    model = small("residual_gelu")
    idx = torch.randint(50257, (2, 16))
    logits, loss = model(idx), model(idx, idx)
    assert logits.shape == (2, 16, 50304) and loss.shape == ()
    torch.testing.assert_close(loss, F.cross_entropy(logits.reshape(-1, 50304), idx.reshape(-1)))


def test_the_loss_only_forward_has_the_gradients_of_the_logits_forward():
    """Training's loss-only forward is the same function as computing the loss from the logits."""
    model = small("residual_gelu").double()
    idx = torch.randint(50257, (2, 16))
    grads = []
    for loss_of in (
        lambda: model(idx, idx),
        lambda: F.cross_entropy(model(idx).reshape(-1, 50304), idx.reshape(-1)),
    ):
        model.zero_grad()
        loss_of().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("chunks", [2, 3, 32])
def test_chunked_loss_equals_the_full_loss_and_its_gradients(chunks):
    model = small("residual_gelu").double()
    idx = torch.randint(50257, (2, 16))
    results = []
    for loss_chunks in (1, chunks):
        model.loss_chunks = loss_chunks
        model.zero_grad()
        loss = model(idx, idx)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (full, full_grads), (chunked, chunked_grads) = results
    torch.testing.assert_close(chunked, full, rtol=1e-12, atol=0)
    for name in full_grads:
        torch.testing.assert_close(chunked_grads[name], full_grads[name], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "mode,qk_norm,gate",
    [
        ("residual_gelu", False, None),
        ("residual_bottleneck_linear", False, None),
        ("residual_gelu", True, None),
        ("residual_gelu", True, "elementwise"),
    ],
)
def test_fused_projection_is_the_same_function_with_the_same_gradients(mode, qk_norm, gate):
    """The fused K, V, W1 matmul (paper section 4) against the plain modules, in float64."""
    model = small(mode, qk_norm=qk_norm, attention_gate=gate).double()
    with torch.no_grad():  # a non-trivial RMSNorm gain, so that a wrongly folded gain would show
        for block in model.transformer.h:
            block.attn.query_mlp.norm_in.weight.uniform_(0.5, 1.5)
    idx = torch.randint(50257, (2, 16))
    results = []
    for fused in (False, True):
        model.zero_grad()
        model.fuse_projections(fused)
        logits = model(idx)
        model(idx, idx).backward()
        results.append((logits, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (plain, plain_grads), (fused, fused_grads) = results
    torch.testing.assert_close(fused, plain, rtol=1e-10, atol=1e-10)
    assert fused_grads.keys() == plain_grads.keys()
    for name in plain_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=1e-9, atol=1e-12)


def test_fused_projection_input_gradient():
    attn = small("residual_gelu").double().transformer.h[0].attn
    x = torch.randn(2, 5, 32, dtype=torch.float64, requires_grad=True)
    outputs = []
    for fused in (False, True):
        attn.fused = fused
        q, k, v = attn.project(x)
        (grad,) = torch.autograd.grad((q * 1.1 + k * 0.7 - v).sum(), x)
        outputs.append((q, k, v, grad))
    for plain, fused in zip(*outputs):
        torch.testing.assert_close(fused, plain, rtol=1e-10, atol=1e-12)


def test_fused_and_unfused_models_share_one_checkpoint_layout():
    plain, fused = small("residual_gelu"), small("residual_gelu").fuse_projections()
    assert plain.state_dict().keys() == fused.state_dict().keys()
    fused.load_state_dict(plain.state_dict())
    idx = torch.randint(50257, (1, 16))
    torch.testing.assert_close(fused(idx)[0], plain(idx)[0])
