"""runtime.deterministic: the settings under which two runs of one configuration on one machine
compute the same bits, made in one place before the model is built (docs/runs.md, "Deterministic
runs"). The levers that cannot be deterministic are refused with the configuration
(repro.config.run.NOT_DETERMINISTIC), before anything is computed.
"""

from __future__ import annotations

import os

import torch

from repro.errors import ReproError

# cuBLAS sums in a fixed order only with a fixed workspace per stream, and reads this variable
# once, when its first handle is made: it is set before CUDA starts. PyTorch documents both values
# as deterministic; :4096:8 (eight buffers of 4 MiB) is the one set where none is.
CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")


def make_deterministic() -> None:
    """Deterministic kernels from here on in this process: torch's, cuDNN's, cuBLAS's, inductor's
    random numbers; a cuBLAS workspace already set to another value is refused in one line."""
    workspace = os.environ.setdefault(CUBLAS_WORKSPACE, DETERMINISTIC_WORKSPACES[0])
    if workspace not in DETERMINISTIC_WORKSPACES:
        raise ReproError(
            f"runtime.deterministic: ${CUBLAS_WORKSPACE} is {workspace[:40]!r}, with which cuBLAS "
            f"is not deterministic: unset it, or set it to {DETERMINISTIC_WORKSPACES[0]}"
        )
    # An operation without a deterministic kernel raises rather than run a nondeterministic one.
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False  # else cuDNN keeps whichever kernel timed fastest
    import torch._inductor.config as inductor

    inductor.fallback_random = True  # compiled random draws as eager torch makes them
