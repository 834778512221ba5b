"""Where and in what precision a model runs: the device, and training's precision (§2.3)."""

from __future__ import annotations

from contextlib import nullcontext

import torch


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def precision(device: torch.device):
    """Training's precision (§2.3): on CUDA TF32 matmuls and a bf16 autocast context; fp32 else."""
    if device.type != "cuda":
        return nullcontext()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return torch.autocast("cuda", dtype=torch.bfloat16)
