"""Where the tests that need a device run: marks for the tests of CUDA, and whether the GPU's
compiled path runs on the CPU."""

import os

import pytest
import torch

# The tests marked `gpu` that need a CUDA device (`pytest -m gpu tests` runs them where one is).
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")]
# The GPU's compiled path on CPU (inductor's C++ kernels), where no GPU is. Compiling takes minutes
# here: run where REPRO_TEST_COMPILED_CPU=1 (benchmarks/gpu/ci.sh, under the GPU node's torch).
COMPILED_ON_CPU = os.environ.get("REPRO_TEST_COMPILED_CPU") == "1"
