"""Where and in what precision a model runs: the device, and training's precision (§2.3)."""

from __future__ import annotations

from contextlib import nullcontext

import torch

from repro.errors import ReproError


def resolve_device(name: str) -> torch.device:
    """`auto` (CUDA if present, else CPU) or a device name this machine has; else a ReproError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ReproError(f"device {name!r}: not a device (auto, cpu, cuda, cuda:N, mps)") from None
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ReproError(
            f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA "
            f"device(s) (torch {torch.__version__}); use cpu or auto"
        )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ReproError(f"device {name!r}: MPS is not available on this machine")
    return device


def precision(device: torch.device):
    """Training's precision (§2.3): on CUDA TF32 matmuls and a bf16 autocast context; fp32 else.

    TF32 through set_float32_matmul_precision, which sets every backend's new `fp32_precision`
    alike: both it and the legacy getter that inductor's max-autotune reads stay valid (setting
    only cuBLAS's `fp32_precision` makes the legacy getter raise)."""
    if device.type != "cuda":
        return nullcontext()
    torch.set_float32_matmul_precision("high")
    return torch.autocast("cuda", dtype=torch.bfloat16)
