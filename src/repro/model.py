"""The GPT-2-style model of the paper: blocks, embeddings, loss, generation and sizes
(docs/specification.md §1); its attention and query projections are repro.attention.

Module names follow nanoGPT (c_attn, c_proj, c_fc, ln_1, ...) so that the authors' checkpoints map
onto ours with a short rename table (repro.annex.authors.checkpoint).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import checkpoint

# Relative: an export carries this file, attention.py and sizes.py beside its weights (repro.sizes).
from .attention import CausalSelfAttention, KVCache
from .sizes import ModelSizes

# The LM head's mean cross-entropy three ways, the same up to the order of float sums: whole
# (the authors', the default), chunked (runtime.loss_chunks) and fused (runtime.fused_loss, by
# one of the FUSED_LOSSES kernels).


def at_least_float32(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


def cross_entropy(logits, targets):
    """Mean cross-entropy over every position, in float32 at least (bf16 logits are upcast)."""
    return F.cross_entropy(
        at_least_float32(logits.reshape(-1, logits.size(-1))), targets.reshape(-1)
    )


def chunked_cross_entropy(x, weight, targets, chunks: int):
    """The LM head and the mean cross-entropy, `chunks` slices of the positions at a time, so at
    most one slice of the logits exists at once; equal to cross_entropy(x @ weight.T, targets) up
    to the order of the float sums."""
    x, targets = x.reshape(-1, x.size(-1)), targets.reshape(-1)
    sums = [
        checkpoint(_summed_cross_entropy, xs, weight, ts, use_reentrant=False)
        for xs, ts in zip(x.chunk(chunks), targets.chunk(chunks))
    ]
    return torch.stack(sums).sum() / targets.numel()


def _summed_cross_entropy(x, weight, targets):
    return F.cross_entropy(at_least_float32(F.linear(x, weight)), targets, reduction="sum")


def fused_cross_entropy(x, weight, targets, chunks: int):
    """cross_entropy(x @ weight.T, targets), its gradients taken in the forward pass, by slices."""
    return FusedCrossEntropy.apply(x.reshape(-1, x.size(-1)), weight, targets.reshape(-1), chunks)


class FusedCrossEntropy(torch.autograd.Function):
    """The head and the loss one slice at a time, with the gradients of x and of the head's weight
    at once (d loss / d logits = softmax - onehot); the backward pass only scales them, so the
    logits are never kept nor the head recomputed."""

    @staticmethod
    def forward(ctx, x, weight, targets, chunks):
        grad_x = torch.empty_like(x)
        grad_weight = torch.zeros(weight.shape, device=weight.device, dtype=torch.float32)
        total = torch.zeros((), device=x.device, dtype=torch.float32)
        for xs, ts, gs in zip(x.chunk(chunks), targets.chunk(chunks), grad_x.chunk(chunks)):
            logits = at_least_float32(F.linear(xs, weight))
            total += F.cross_entropy(logits, ts, reduction="sum")
            grad = logits.softmax(-1)
            grad[torch.arange(ts.numel(), device=ts.device), ts] -= 1
            grad = grad.to(torch.promote_types(xs.dtype, weight.dtype))
            # Under autocast these run in bf16 as the head's own backward pass would.
            gs.copy_(grad @ weight.to(grad.dtype))
            grad_weight += (grad.T @ xs.to(grad.dtype)).float()
        n = targets.numel()
        ctx.save_for_backward(grad_x / n, (grad_weight / n).to(weight.dtype))
        return total / n

    @staticmethod
    def backward(ctx, grad_loss):
        grad_x, grad_weight = ctx.saved_tensors
        return grad_x * grad_loss, grad_weight * grad_loss, None, None


def liger_cross_entropy(x, weight, targets, chunks: int):
    """cross_entropy(x @ weight.T, targets) by liger-kernel's fused linear cross-entropy (Triton
    kernels, CUDA or Triton's interpreter), its gradients taken in the forward pass too, over
    slices of its own size (about as many logits at once as x has values): chunks is unused."""
    # Here, not at the top: liger-kernel is an optional package, imported where it runs.
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    return liger_fused_linear_cross_entropy(x.reshape(-1, x.size(-1)), weight, targets.reshape(-1))


# runtime.fused_loss's kernels by name (repro.config.Runtime.loss_kernel).
FUSED_LOSSES = {"repro": fused_cross_entropy, "liger": liger_cross_entropy}


class MLP(nn.Module):
    def __init__(self, config: ModelSizes):
        super().__init__()
        self.c_fc = nn.Linear(config.d_model, config.mlp_hidden, bias=False)
        self.c_proj = nn.Linear(config.mlp_hidden, config.d_model, bias=False)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config: ModelSizes):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.d_model, eps=1e-5, bias=False)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=1e-5, bias=False)
        self.mlp = MLP(config)

    def forward(self, x, cache: KVCache | None = None, layer: int = 0):
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: ModelSizes):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.d_model),
                wpe=nn.Embedding(config.block_size, config.d_model),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.d_model, eps=1e-5, bias=False),
            )
        )
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Speed switches like the fused projection: chunked_cross_entropy, and the name of one of
        # the FUSED_LOSSES (None: the loss is not fused).
        self.loss_chunks, self.fused_loss = 1, None
        if config.tie_embeddings:
            self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        # GPT-2's scaled init of the two residual output projections of each block.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def fuse_projections(self, enabled: bool = True) -> "GPT":
        """Use the fused K, V, W1 projection of the query MLP's modes (others have none)."""
        for block in self.transformer.h:
            block.attn.fused = enabled and block.attn.query_mlp is not None
        return self

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None, cache: KVCache | None = None, last_only: bool = False):
        """Token ids (B, T) -> logits (B, T, vocab); with targets, the mean loss alone: a compiled
        forward returning logits would make its backward materialise their zero gradient. With a
        cache, idx follow the positions it holds; last_only: the last position's logits alone."""
        start, T = (0 if cache is None else cache.length), idx.shape[1]
        if start + T > self.config.block_size:
            raise ValueError(
                f"{start + T} positions exceed the block size {self.config.block_size}"
            )
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for layer, block in enumerate(self.transformer.h):
            x = block(x, cache, layer)
        if cache is not None:
            cache.length = start + T
        x = self.transformer.ln_f(x[:, -1:] if last_only else x)
        if targets is None:
            return self.lm_head(x)
        if self.fused_loss:
            loss = FUSED_LOSSES[self.fused_loss]
            return loss(x, self.lm_head.weight, targets, self.loss_chunks)
        if self.loss_chunks > 1:
            return chunked_cross_entropy(x, self.lm_head.weight, targets, self.loss_chunks)
        return cross_entropy(self.lm_head(x), targets)

    @torch.no_grad()
    def generate(
        self,
        idx,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
        cache: KVCache | None = None,
        vocab: int | None = None,
    ):
        """The max_new_tokens (B, N) that follow idx (B, T), with the key/value cache; sampled as
        next_token does. Past the block size the context is its last block_size tokens (nanoGPT's
        sampler): their positions shift, so the cache is rebuilt on that window."""
        block = self.config.block_size
        if cache is None:
            cache = KVCache(self.config.n_layer, block)
        context, out = idx, []  # context: what the window is cut from
        for _ in range(max_new_tokens):
            if cache.length + idx.shape[1] > block:
                if context.shape[1] < block:  # the cache's earlier tokens are not known here
                    raise ValueError("past the block size, generate needs the whole context")
                cache.length, idx = 0, context[:, -block:]
            logits = self(idx, cache=cache, last_only=True)[:, -1]
            idx = next_token(logits, temperature, top_k, generator, vocab)
            context = torch.cat([context, idx], dim=1)
            out.append(idx)
        return torch.cat(out, dim=1)


def next_token(logits, temperature: float, top_k: int | None, generator, vocab: int | None = None):
    """A token (B, 1) drawn from softmax(logits / T) over the top_k of the first `vocab` ids (the
    rest are padding); temperature 0: the most likely. Stays on the device: no sync."""
    logits = logits[:, :vocab]
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    logits = at_least_float32(logits) / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)


def count_parameters(model: GPT) -> dict[str, int]:
    """Total parameters (tied weights once), non-embedding ones (total minus wte and wpe), and
    those of the attention gates (0 without: repro.attention.AttentionGate), which both include."""
    total = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once
    embedding = model.transformer.wte.weight.numel() + model.transformer.wpe.weight.numel()
    gates = sum(p.numel() for n, p in model.named_parameters() if ".attn.gate." in n)
    return {"total_params": total, "non_embedding_params": total - embedding, "gate_params": gates}


def parameter_counts(config: ModelSizes) -> dict[str, int]:
    """count_parameters of the model `config` describes, built on the meta device."""
    with torch.device("meta"), _NoInitialisation():
        return count_parameters(GPT(config))


class _NoInitialisation(TorchFunctionMode):
    """torch.nn.init's functions return their tensor as it is. A meta tensor has no values to
    set, and setting them anyway runs torch's Python decompositions, whose first use imports
    torch._dynamo: 1.6 s of every process that sizes a model before building it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            return kwargs["tensor"] if "tensor" in kwargs else args[0]
        return func(*args, **kwargs)


def flops_per_token(config: ModelSizes, total_params: int) -> int:
    """Training FLOPs per token, 6 N + 12 L H Q T (§7; PaLM appendix B, as nanoGPT counts it);
    N excludes the position embeddings (the tied token embedding is a real matmul in the head)."""
    c = config
    n = total_params - c.block_size * c.d_model
    return 6 * n + 12 * c.n_layer * c.n_head * c.head_size * c.block_size
