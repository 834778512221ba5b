"""The nonlinear query of the paper: the bottleneck MLP of eq. (3) (docs/specification.md §1)."""

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
