"""The GPU validation's measurements that run inside a step's own process (benchmarks/gpu/stages.py
runs each as a step with a deadline), each writing its REPORT.json for the stage's record:

  measure.py environment REPORT.json --device D
      versions of what the GPU path runs on, the GPU, whether each module training, evaluation
      and checkpointing load imports, a configuration validated, and the compile toolchain: one
      tiny function compiled by inductor and run on the device
  measure.py pair NAME REPORT.json --preset P --device D --micro-batch N --steps S --warmup W
      [--no-compile]
      a before/after pair that decides a default (PAIRS), both sides timed in this one process
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import sys
import time

import numpy as np
import torch
from packages import MODULES

# Every module of the package the training path imports, and every module they import from
# elsewhere (packages.MODULES): one that fails to import is found before any timing.
GPU_PATH = MODULES + [
    "repro.cli",
    "repro.config",
    "repro.training.run",
    "repro.training.loop",
    "repro.model",
    "repro.attention",
    "repro.training.checkpoints",
    "repro.training.evaluation",
    "repro.data.batches",
    "repro.data.indices",
    "repro.data.tokens",
    "repro.annex.perf.bench",
    "repro.annex.perf.cost",
    "repro.runtime.device",
    "repro.runtime.distributed",
    "repro.training.fit",
    "repro.runtime.gpus",
    "repro.runtime.lock",
    "repro.runtime.signals",
]
PAIRED = "resgelu-lr3e-3"  # the pairs time the paper's model


def toolchain(device: str) -> dict:
    """Whether torch.compile works here: one tiny function compiled by inductor (on a GPU Triton,
    whose launcher needs a C compiler and Python's headers; on CPU C++) and run on `device`."""
    began = time.monotonic()
    if device == "cpu":
        # Inductor's C++ build imports torch.utils.cpp_extension, which warns "No CUDA runtime is
        # found" where a CUDA toolkit is installed but no GPU: the CPU mode's usual machine, and
        # nothing to a C++ kernel. Its errors still show.
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    try:
        x = torch.randn(256, device=device)
        compiled = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2 + 1)
        right = torch.allclose(compiled(x), torch.nn.functional.gelu(x) * 2 + 1)
        status, error = ("ok", None) if right else ("failed", "a wrong result")
    except Exception as e:  # noqa: BLE001 (the failure is the finding: training runs uncompiled)
        status, error = "failed", f"{type(e).__name__}: {str(e)[:2000]}"
    seconds = round(time.monotonic() - began, 1)
    print(f"compile toolchain: {status} ({seconds} s){f': {error}' if error else ''}", flush=True)
    return {"status": status, "seconds": seconds, "error": error}


def validates() -> str:
    """Whether a configuration loads and validates (jsonschema's first use), as training's."""
    try:
        from repro.config import load_run

        load_run("paper", PAIRED)
        return "ok"
    except Exception as e:  # noqa: BLE001 (each failure is recorded, not raised)
        return f"{type(e).__name__}: {e}"


def environment(device: str) -> dict:
    """Versions of what the GPU path runs on, whether each of its modules imports, whether a
    configuration validates, and whether torch.compile works on `device`."""
    env = {
        "status": "ok",
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "numpy": np.__version__,
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env |= {
            "gpu": props.name,
            "gpu_memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
            "gpus": torch.cuda.device_count(),
        }
        try:
            query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            env["driver"] = subprocess.run(query, capture_output=True, text=True).stdout.strip()
        except OSError:
            env["driver"] = None
    imports = {}
    for module in GPU_PATH:
        try:
            __import__(module)
            imports[module] = "ok"
        except Exception as e:  # noqa: BLE001 (each failure is recorded, not raised)
            imports[module] = f"{type(e).__name__}: {e}"
        print(f"import {module}: {imports[module]}", flush=True)
    env["imports"] = imports
    env["configuration"] = validates()
    print(f"configuration validated: {env['configuration']}", flush=True)
    env["toolchain"] = toolchain(device)
    checks = [*imports.values(), env["configuration"], env["toolchain"]["status"]]
    if any(v != "ok" for v in checks):
        env["status"] = "failed"
    return env


def pairs(device: str) -> dict[str, tuple[dict, dict]]:
    """The before/after pairs that decide the defaults, as runtime settings: name -> (before,
    after)."""
    attention = "cudnn" if device.startswith("cuda") else "math"  # CPU has no cuDNN
    return {
        "loss_chunks": ({"loss_chunks": 1}, {"loss_chunks": 8}),
        "fused_projection": ({"fused_projection": True}, {"fused_projection": False}),
        "attention": ({"attention": "flash"}, {"attention": attention}),
        # max-autotune without CUDA graphs: inductor tries Triton templates for every matmul.
        "inductor_mode": (
            {"compile_mode": "default"},
            {"compile_mode": "max-autotune-no-cudagraphs"},
        ),
    }


def pair(name: str, args) -> dict:
    """Both sides of pair `name`, one after the other; the ratio of their step times."""
    from repro.annex.perf import bench
    from repro.config import load_run
    from repro.runtime.device import out_of_memory, resolve_device

    device, steps, warmup = resolve_device(args.device), args.steps, args.warmup
    run = load_run(args.preset, PAIRED).with_runtime(
        train_micro_batch=args.micro_batch, compile=args.compile
    )
    if name == "inductor_mode" and not run.runtime.enabled("compile", device.type):
        return {"status": "skipped", "reason": "compile is off here"}
    rows = []
    for side in pairs(args.device)[name]:
        try:
            rows.append(bench.time_steps(run.with_runtime(**side), device, steps, warmup))
        except RuntimeError as error:
            if not out_of_memory(error):
                raise
            rows.append({"out_of_memory": True, "options": side})
        print(f"{name} {side}: {rows[-1].get('step_s')} s/step", flush=True)
    ratio = None
    if all("step_s" in r for r in rows):
        ratio = rows[1]["step_s"] / rows[0]["step_s"]
    print(f"{name}: after / before = {ratio}", flush=True)
    return {"before": rows[0], "after": rows[1], "after_over_before": ratio}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["environment", "pair"])
    parser.add_argument("name", nargs="?", help="the pair's name (pair)")
    parser.add_argument("report", help="where the JSON goes")
    for option in ("--preset", "--device"):
        parser.add_argument(option)
    for option in ("--micro-batch", "--steps", "--warmup"):
        parser.add_argument(option, type=int)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None)
    args = parser.parse_args(argv)
    if args.what == "environment":
        result = environment(args.device)
    else:
        result = pair(args.name, args)
    with open(args.report, "w") as f:
        json.dump(result, f, indent=2)
    return 0 if result.get("status", "ok") != "failed" else 1


if __name__ == "__main__":
    sys.exit(main())
