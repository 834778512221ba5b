"""Where and in what precision a model runs: the device, training's precision (§2.3), the
attention kernel (runtime.attention), and whether sizes fit the memory this process may use.

Sizes that cannot fit are refused before anything is allocated (the allocator's own failure is a
traceback). On the CPU the memory a process may use is the least of the machine's, its
address-space limit's and its cgroup's (a container, SLURM's --mem).
"""

from __future__ import annotations

import gc
import os
import resource
from contextlib import ExitStack, nullcontext
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from repro.errors import ReproError

# What an allocation failure says, wherever it surfaces: torch's own OutOfMemoryError, cuBLAS or
# cuDNN failing to allocate a workspace, or inductor wrapping either while it autotunes.
OUT_OF_MEMORY = ("out of memory", "ALLOC_FAILED")


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
    TF32 through set_float32_matmul_precision: setting only cuBLAS's `fp32_precision` makes the
    legacy getter inductor's max-autotune reads raise."""
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
        """The SDPA backend a causal attention of this shape runs on `device` in this context; a
        ReproError where runtime.attention names one that cannot run here."""
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


def check_loss_kernel(kernel: str | None, device: torch.device) -> None:
    """A ReproError where runtime.fused_loss names a kernel that cannot run on `device` here.
    liger-kernel's is Triton's: it runs on CUDA, or on the CPU under Triton's interpreter
    (TRITON_INTERPRET=1 before Triton is imported; slow, for tests)."""
    if kernel != "liger":
        return
    try:
        import liger_kernel.transformers.functional  # noqa: F401
    except ImportError as error:
        raise ReproError(
            f"runtime.fused_loss: liger needs liger-kernel and Triton, not importable here "
            f"({error}); pip install liger-kernel, or use true or false"
        ) from None
    interpreted = device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"
    if device.type != "cuda" and not interpreted:
        raise ReproError(
            f"runtime.fused_loss: liger cannot run on {device} here (Triton's kernels need CUDA, "
            f"or TRITON_INTERPRET=1 on the CPU); use true or false"
        )


CGROUP_ROOT = Path("/sys/fs/cgroup")  # tests point this at a folder of their own
# (limit file, usage file) of cgroup v2 and v1, under the process's cgroup folder
CGROUP_FILES = (
    ("memory.max", "memory.current"),
    ("memory.limit_in_bytes", "memory.usage_in_bytes"),
)


def physical_memory() -> int:
    """This machine's memory in bytes (tests replace this to simulate a small machine)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def cpu_memory() -> dict[str, int]:
    """The bytes this process may still use under each limit that applies, by its name."""
    limits = {"this machine's cpu memory": physical_memory()}
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        used = pages * os.sysconf("SC_PAGE_SIZE")
        limits["this process's address-space limit (ulimit -v) less what it uses"] = max(
            soft - used, 0
        )
    cgroup = _cgroup_left()
    if cgroup is not None:
        limits["its cgroup's memory limit less what the cgroup uses"] = cgroup
    return limits


def _cgroup_left() -> int | None:
    """What the process's cgroup may still use (limit less usage); None where none is set."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        folders = [CGROUP_ROOT / path.lstrip("/"), CGROUP_ROOT]  # a container sees its own root
        if "memory" in controllers.split(","):
            folders = [CGROUP_ROOT / "memory" / path.lstrip("/"), CGROUP_ROOT / "memory"]
        elif controllers:
            continue
        for folder in folders:
            for limit, usage in CGROUP_FILES:
                try:
                    value = (folder / limit).read_text().strip()
                    used = int((folder / usage).read_text())
                except (OSError, ValueError):
                    continue
                # "max" (v2) or a page-rounded 2**63 (v1): no limit
                return (
                    None if value == "max" or int(value) >= 1 << 62 else max(int(value) - used, 0)
                )
    return None


def check_memory(what: str, needed: int, device: torch.device = torch.device("cpu")) -> None:
    """Refuse `what` when it needs more bytes than `device` (CPU or CUDA) can give it at all."""
    if device.type == "cuda":
        name = f"this machine's {device.type} memory"
        available = torch.cuda.get_device_properties(device).total_memory
    elif device.type == "cpu":
        name, available = min(cpu_memory().items(), key=lambda item: item[1])
    else:
        return
    if needed > available:
        raise ReproError(
            f"{what} needs {needed / 2**30:,.1f} GiB, more than the {available / 2**30:,.1f} GiB "
            f"of {name}: choose smaller sizes"
        )


def out_of_memory(error: BaseException) -> bool:
    """Whether an error, or one it wraps, is a failure to allocate device memory."""
    while error is not None:
        if isinstance(error, torch.cuda.OutOfMemoryError) or any(
            s in str(error) for s in OUT_OF_MEMORY
        ):
            return True
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return False


def free_device_memory() -> None:
    """Collect what still holds tensors, then hand the cached blocks back to the device."""
    gc.collect()
    torch.cuda.empty_cache()
