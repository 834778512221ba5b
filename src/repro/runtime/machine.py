"""The machine a process computes on, as far as the last bits of a CPU computation depend on it:
the CPU's model, the vector unit torch's kernels use, and the math libraries torch calls. The math
libraries pick their kernels by the processor itself (vendor, model, cache sizes), so two machines
of the same vector unit may still round differently. run.json records this, and the tests name the
machines whose numbers they compare."""

from __future__ import annotations

import platform
import re
import subprocess
from pathlib import Path

import torch

# Where a CPU's model name is found, in order: Linux on x86 (/proc/cpuinfo), Linux on ARM (whose
# /proc/cpuinfo names no model; lscpu decodes the core's part number), macOS.
MODEL_COMMANDS = (["lscpu"], ["sysctl", "machdep.cpu.brand_string"])
MODEL_LINE = re.compile(r"^(?:model name|Model name|machdep\.cpu\.brand_string)\s*:\s*(.+)$", re.M)

# The lines of torch.__config__.show() that name the math libraries of its CPU kernels.
LIBRARIES = "Math Kernel Library|MKL-DNN|oneDNN|OpenBLAS|Compute Library"
LIBRARY_LINE = re.compile(rf"^\s*- (.*(?:{LIBRARIES}).*)")


def cpu_model() -> str:
    """The CPU's model name (e.g. `AMD EPYC 9B14`, `Neoverse-N1`, `Apple M2`); where none of the
    sources names one, the machine's architecture."""
    try:
        model = MODEL_LINE.search(Path("/proc/cpuinfo").read_text())
    except OSError:
        model = None
    for command in MODEL_COMMANDS:
        if model:
            break
        model = MODEL_LINE.search(_output(command))
    return model[1].strip() if model else platform.processor() or platform.machine() or "unknown"


def _output(command: list[str]) -> str:
    """A command's standard output; empty where it is missing or fails."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_capability() -> str:
    """The vector unit torch's CPU kernels use (AVX512, AVX2, SVE256, DEFAULT...), which the
    environment variable ATEN_CPU_CAPABILITY may lower."""
    return torch.backends.cpu.get_cpu_capability()


def math_libraries() -> list[str]:
    """torch's BLAS (its build setting BLAS_INFO: mkl, open, accelerate...) and the versions of
    the math libraries it was built with (MKL, oneDNN, OpenBLAS, the Arm Compute Library)."""
    shown = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=([^,\s]+)", shown)
    lines = [m[1].strip() for m in map(LIBRARY_LINE.match, shown.splitlines()) if m]
    return [f"BLAS: {blas[1] if blas else 'unknown'}", *lines]


def machine() -> dict:
    """This process's machine: the CPU, its vector unit as torch uses it, torch and its math
    libraries."""
    return {
        "cpu": cpu_model(),
        "cpu_capability": cpu_capability(),
        "torch_version": torch.__version__,
        "math_libraries": math_libraries(),
    }


def described(machine: dict) -> str:
    """A machine in one line, as a message names it: the CPU, its vector unit, torch and its BLAS
    (the other libraries' versions come with torch's)."""
    blas = next(iter(machine.get("math_libraries") or []), "BLAS: unknown")
    return (
        f"{machine.get('cpu')} ({machine.get('cpu_capability')}, torch "
        f"{machine.get('torch_version')}, {blas})"
    )
