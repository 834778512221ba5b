"""Where and in what precision a model runs: the device, training's precision (§2.3), and the
attention kernel (runtime.attention)."""

from __future__ import annotations

from contextlib import ExitStack, nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

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


# runtime.attention's names of torch's SDPA backends; `auto` lets SDPA choose for itself.
SDPA_BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


class Kernels:
    """The context every forward pass of a run is taken in: the precision's autocast and the SDPA
    backend runtime.attention names. Entered anew at every micro-batch (a generator-made context
    manager, as sdpa_kernel is, can be entered only once); torch.compile traces under it."""

    def __init__(self, autocast, attention: str = "auto"):
        self.autocast, self.attention, self._stacks = autocast, attention, []

    def __enter__(self):
        stack = ExitStack()
        stack.enter_context(self.autocast)
        if self.attention != "auto":
            stack.enter_context(sdpa_kernel([SDPA_BACKENDS[self.attention]]))
        self._stacks.append(stack)

    def __exit__(self, *exc):
        return self._stacks.pop().__exit__(*exc)

    def attention_kernel(self, heads: int, block: int, head_size: int, device) -> str:
        """The SDPA backend a causal attention of this shape runs on `device` in this context
        (e.g. FLASH_ATTENTION, CUDNN_ATTENTION, MATH), as SDPA itself chooses; a ReproError where
        runtime.attention names one that cannot run here."""
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        q = torch.zeros(1, heads, block, head_size, device=device, dtype=dtype)
        try:
            with self:
                return SDPBackend(torch._fused_sdp_choice(q, q, q, is_causal=True)).name
        except RuntimeError:
            raise ReproError(
                f"runtime.attention: {self.attention} cannot run on {device} here "
                f"(torch {torch.__version__}); use auto or another backend"
            ) from None
