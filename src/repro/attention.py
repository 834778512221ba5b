"""Causal self-attention: the query of each mode (the nonlinear one the bottleneck MLP of eq. (3)),
the optional QK-norm and output gate, and the key/value cache of generation
(docs/specification.md §1, docs/annex/ablation.md)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .sizes import ModelSizes


class QueryMLP(nn.Module):
    """f(x) = LN(GELU(RMSNorm(x) W1) W2), the bottleneck MLP of eq. (3); without the GELU,
    LN(RMSNorm(x) W1 W2) (query mode residual_bottleneck_linear: the same parameters and norms,
    so that it isolates the nonlinearity)."""

    def __init__(self, config: ModelSizes):
        super().__init__()
        d, r = config.d_model, config.query_hidden
        self.nonlinear = config.query_mode == "residual_gelu"
        self.norm_in = nn.RMSNorm(d, eps=1e-5)
        self.fc_in = nn.Linear(d, r, bias=False)
        self.fc_out = nn.Linear(r, d, bias=False)
        self.norm_out = nn.LayerNorm(d, eps=1e-5, bias=False)

    def forward(self, x):
        return self.finish(self.fc_in(self.norm_in(x)))

    def finish(self, h):
        """h = RMSNorm(x) W1 -> f(x); the part after the first matmul, shared by the fused path."""
        return self.norm_out(self.fc_out(F.gelu(h) if self.nonlinear else h))

    def folded_weight(self):
        """W1 with the RMSNorm gain g folded in: RMSNorm(x) W1 = (x (g * W1)) / rms(x)."""
        return self.fc_in.weight * self.norm_in.weight

    def inv_rms(self, x):
        return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.norm_in.eps)


class HeadRMSNorm(nn.RMSNorm):
    """RMSNorm of each head's slice, one gain shared by the heads (the model option qk_norm)."""

    def __init__(self, config: ModelSizes):
        super().__init__(config.head_size, eps=1e-5)

    def forward(self, t):
        return super().forward(t.unflatten(-1, (-1, self.normalized_shape[0]))).flatten(-2)


class AttentionGate(nn.Linear):
    """y_h <- y_h * sigmoid(x W_g) on each head's output, x the layer's normed input (Qiu et al.
    2025, arXiv 2505.06708): one gate per head or per channel; no bias, as nowhere in the model."""

    def __init__(self, config: ModelSizes):
        headwise = config.attention_gate == "headwise"
        super().__init__(config.d_model, config.n_head if headwise else config.d_model, bias=False)
        self.headwise = headwise

    def forward(self, x, y):
        """x (B, T, d), y (B, T, n_head, head_size) -> y gated, the same shape."""
        gate = torch.sigmoid(super().forward(x))
        return y * (gate[..., None] if self.headwise else gate.view_as(y))


class KVCache:
    """Keys and values of every layer: a nonlinear query changes the work, not the cache."""

    def __init__(self, n_layer: int, block_size: int):
        self.k: list[torch.Tensor | None] = [None] * n_layer
        self.v: list[torch.Tensor | None] = [None] * n_layer
        self.block_size = block_size
        self.length = 0  # positions filled; set it lower to rewind (later entries are overwritten)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v (B, H, T, hs) at [length, length + T); return all cached up to there."""
        if self.k[layer] is None:  # allocated at first use: then dtype and device are the model's
            shape = (k.shape[0], k.shape[1], self.block_size, k.shape[3])
            self.k[layer] = k.new_empty(shape)
            self.v[layer] = v.new_empty(shape)
        end = self.length + k.shape[2]
        self.k[layer][:, :, self.length : end] = k
        self.v[layer][:, :, self.length : end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelSizes):
        super().__init__()
        self.config = config
        d = config.d_model
        # The linear modes project q, k, v in one matmul; the others project only k, v.
        self.c_attn = nn.Linear(d, (3 if config.has_linear_query else 2) * d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=False)
        self.query_mlp = QueryMLP(config) if config.has_query_mlp else None
        self.q_norm = HeadRMSNorm(config) if config.qk_norm else None
        self.k_norm = HeadRMSNorm(config) if config.qk_norm else None
        self.gate = AttentionGate(config) if config.attention_gate else None
        # A speed switch, not part of the model (GPT.fuse_projections).
        self.fused = False

    def project(self, x):
        """x -> (q, k, v), each (B, T, d), q already multiplied by the query scale."""
        d, mode = self.config.d_model, self.config.query_mode
        if self.config.has_linear_query:
            q, k, v = self.c_attn(x).split(d, dim=2)
            if mode == "residual_linear":
                q = x + q
        elif self.fused:
            # The paper's section 4: K, V and the query MLP's first layer in one d -> 2.5d matmul;
            # the weight is built from the canonical parameters at every call (tiny next to the
            # activations' matmul), so checkpoints keep one layout.
            mlp = self.query_mlp
            weight = torch.cat([self.c_attn.weight, mlp.folded_weight()])
            k, v, h = F.linear(x, weight).split([d, d, mlp.fc_in.out_features], dim=2)
            q = x + mlp.finish(h * mlp.inv_rms(x))
        else:
            k, v = self.c_attn(x).split(d, dim=2)
            q = x if mode == "identity" else x + self.query_mlp(x)
        if self.q_norm is not None:  # before the query scale, which the norm would undo
            q, k = self.q_norm(q), self.k_norm(k)
        return q * self.config.resolved_query_scale, k, v

    def forward(self, x, cache: KVCache | None = None, layer: int = 0):
        """Causal attention over x and what a cache holds, x's keys and values added to it."""
        B, T, C = x.shape
        heads = lambda t: t.view(B, T, self.config.n_head, self.config.head_size).transpose(1, 2)
        q, k, v = map(heads, self.project(x))
        start = 0 if cache is None else cache.length
        if cache is not None:
            k, v = cache.append(layer, k, v)
        if start == 0:  # no earlier positions: plainly causal (scale 1/sqrt(head_size))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif T == 1:  # one new token sees every position
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # a later chunk: query i (at position start + i) sees keys up to start + i
            mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(start)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2)  # (B, T, n_head, head_size)
        if self.gate is not None:
            y = self.gate(x, y)
        return self.c_proj(y.reshape(B, T, C))
