"""The machine a run computed on, in run.json: the CPU's model, torch's vector unit, torch's version
and its math libraries (repro.runtime.machine), which a CPU run's last bits depend on."""

import json
import os
import subprocess
import sys

import torch

from repro.runtime import machine

ARM_BUILD = """PyTorch built with:
  - GCC 11.2
  - Intel(R) MKL-DNN v3.7.1 (Git Hash 8d263e693366ef8db40acc569cc7d8edf644556d)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - LAPACK is enabled (usually provided by MKL)
  - Build settings: BLAS_INFO=open, BUILD_TYPE=Release, LAPACK_INFO=open, USE_MKL=OFF,
"""


def test_run_json_names_the_machine_it_ran_on(tiny_baseline_run):
    record = json.loads((tiny_baseline_run / "run.json").read_text())
    assert record["torch_version"] == torch.__version__
    assert record["cpu"] == machine.cpu_model() != ""
    assert record["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["math_libraries"] == machine.math_libraries()
    assert record["math_libraries"][0].startswith("BLAS: ")
    session = record["sessions"][0]
    assert (session["cpu"], session["cpu_capability"]) == (record["cpu"], record["cpu_capability"])


def test_the_math_libraries_are_read_from_torchs_build(monkeypatch):
    monkeypatch.setattr(torch.__config__, "show", lambda: ARM_BUILD)
    assert machine.math_libraries() == [
        "BLAS: open",
        "Intel(R) MKL-DNN v3.7.1 (Git Hash 8d263e693366ef8db40acc569cc7d8edf644556d)",
    ]


def test_the_cpu_model_where_proc_cpuinfo_names_none(monkeypatch):
    """Linux on ARM (lscpu names the core), macOS (sysctl), and a machine that says nothing."""
    monkeypatch.setattr(machine.Path, "read_text", lambda self: "processor\t: 0\nBogoMIPS\t: 50\n")
    outputs = {"lscpu": "Architecture: aarch64\nModel name:  Neoverse-N1\n"}
    monkeypatch.setattr(machine, "_output", lambda command: outputs.get(command[0], ""))
    assert machine.cpu_model() == "Neoverse-N1"

    outputs.clear()
    outputs["sysctl"] = "machdep.cpu.brand_string: Apple M2\n"
    assert machine.cpu_model() == "Apple M2"

    outputs.clear()
    monkeypatch.setattr(machine.platform, "processor", lambda: "")
    monkeypatch.setattr(machine.platform, "machine", lambda: "riscv64")
    assert machine.cpu_model() == "riscv64"


def test_a_missing_command_gives_no_output():
    assert machine._output(["a-command-that-does-not-exist"]) == ""


def test_the_vector_unit_is_the_one_torch_uses():
    """ATEN_CPU_CAPABILITY=default: torch's kernels without vector instructions."""
    code = "from repro.runtime.machine import cpu_capability; print(cpu_capability())"
    env = os.environ | {"ATEN_CPU_CAPABILITY": "default"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "DEFAULT", done.stderr
