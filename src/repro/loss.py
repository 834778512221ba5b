"""The LM head's mean cross-entropy, three ways to the same loss (up to the order of float sums):

cross_entropy           of the whole logits (the authors' way, and the default)
chunked_cross_entropy   runtime.loss_chunks slices of the positions at a time, each slice's
                        logits recomputed in the backward pass: at most one slice exists at once
fused_cross_entropy     runtime.fused_loss: the head and the loss over the slices with their
                        gradients taken at once, so the backward pass only scales them: no
                        logits kept and no head recomputed
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def at_least_float32(t):
    return t.to(torch.promote_types(t.dtype, torch.float32))


def cross_entropy(logits, targets):
    """Mean cross-entropy over every position, in float32 at least (bf16 logits are upcast)."""
    return F.cross_entropy(
        at_least_float32(logits.reshape(-1, logits.size(-1))), targets.reshape(-1)
    )


def chunked_cross_entropy(x, weight, targets, chunks: int):
    """The LM head and the mean cross-entropy, `chunks` slices of the positions at a time.

    Each slice's logits are recomputed in the backward pass instead of kept (activation
    checkpointing), so at most one slice of the (positions x vocab) logits exists at a time. The
    same function as cross_entropy(x @ weight.T, targets), up to the order of the float sums."""
    x, targets = x.reshape(-1, x.size(-1)), targets.reshape(-1)
    sums = [
        checkpoint(_summed_cross_entropy, xs, weight, ts, use_reentrant=False)
        for xs, ts in zip(x.chunk(chunks), targets.chunk(chunks))
    ]
    return torch.stack(sums).sum() / targets.numel()


def _summed_cross_entropy(x, weight, targets):
    return F.cross_entropy(at_least_float32(F.linear(x, weight)), targets, reduction="sum")


def fused_cross_entropy(x, weight, targets, chunks: int):
    """cross_entropy(x @ weight.T, targets) with its gradients computed in the forward pass, a
    slice of the positions at a time (FusedCrossEntropy)."""
    return FusedCrossEntropy.apply(x.reshape(-1, x.size(-1)), weight, targets.reshape(-1), chunks)


class FusedCrossEntropy(torch.autograd.Function):
    """The head and the loss of one slice at a time: its logits, its summed loss, and, since the
    gradient of the loss with respect to the logits is softmax(logits) - onehot(targets), at once
    the gradients of x and of the head's weight. The backward pass scales those by the incoming
    gradient: the logits are never kept nor the head recomputed (at the paper's size a saving of
    the logits' gigabytes and of a third of the head's matmuls)."""

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
