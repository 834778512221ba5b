"""The GPU validation's measurements that run inside a step's own process (benchmarks/gpu/stages.py
runs each as a step with a deadline), each writing its REPORT.json for the stage's record:

  measure.py environment REPORT.json --device D
      versions of what the GPU path runs on, the GPU, whether each module training, evaluation
      and checkpointing load imports, a configuration validated, and the compile toolchain: one
      tiny function compiled by inductor and run on the device
  measure.py pair NAME REPORT.json --preset P --device D --micro-batch N --steps S --warmup W
      [--repeats R] [--no-compile]
      a comparison that decides a default (pairs()): its sides built and warmed in this one
      process, then timed in turns, R interleaved rounds; each side's median and spread
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import statistics
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


def larger_micro_batch(run) -> tuple[int, int]:
    """A micro-batch of at least twice the run's (the least divisor of the batch there is, else
    the batch), and the loss chunks that keep its logits under 2^31 elements per chunk."""
    mb, batch, m = run.runtime.train_micro_batch, run.train.batch_size, run.model
    larger = min((n for n in range(2 * mb, batch + 1) if batch % n == 0), default=batch)
    return larger, math.ceil(larger * m.block_size * m.vocab_size / 2**31)


def pairs(run, device: str) -> dict[str, list[dict]]:
    """The comparisons that decide the defaults, as runtime settings: name -> its sides, the
    default's first. The micro-batch's has three: the larger micro-batch needs its loss in chunks,
    and the chunks alone are the middle side."""
    larger, chunks = larger_micro_batch(run)
    cuda = device.startswith("cuda")
    return {
        # CUDA graphs: each compiled graph replayed in one launch (reduce-overhead).
        "compile_mode": [{"compile_mode": "default"}, {"compile_mode": "reduce-overhead"}],
        "micro_batch": [
            {},
            {"loss_chunks": chunks},
            {"train_micro_batch": larger, "loss_chunks": chunks},
        ],
        "fused_projection": [{"fused_projection": True}, {"fused_projection": False}],
        # cuDNN's is SDPA's choice on Hopper; CPU has no cuDNN: its math kernel stands in.
        "attention": [{"attention": "cudnn" if cuda else "math"}, {"attention": "flash"}],
        # The package's own kernel, and on CUDA liger-kernel's (Triton's, no fp32 softmax kept).
        "fused_loss": [{"fused_loss": False}, {"fused_loss": True}]
        + ([{"fused_loss": "liger"}] if cuda else []),
    }


def warm(bench, run, device, warmup: int, timed: int) -> dict:
    """One side built and warmed (bench.Warmed), or why not: out of memory on this device, or a
    setting this node cannot run (liger-kernel missing)."""
    from repro.errors import ReproError
    from repro.runtime.device import out_of_memory

    try:
        return {"warmed": bench.Warmed(run, device, warmup, timed)}
    except ReproError as error:
        return {"cannot_run": str(error)}
    except RuntimeError as error:
        if not out_of_memory(error):
            raise
        return {"out_of_memory": True}


def spread(times: list[float]) -> float:
    """The repetitions' range over their median."""
    return (max(times) - min(times)) / statistics.median(times)


def pair(name: str, args) -> dict:
    """Every side of comparison `name` built and warmed, then timed in turns, `repeats` rounds
    of `steps` steps each (interleaved: a slow spell of the machine falls on every side); each
    side's median step time and spread, and its median over the first side's."""
    from repro.annex.perf import bench
    from repro.config import load_run
    from repro.runtime.device import resolve_device

    device = resolve_device(args.device)
    run = load_run(args.preset, PAIRED).with_runtime(
        train_micro_batch=args.micro_batch, compile=args.compile
    )
    if name == "compile_mode" and not run.runtime.enabled("compile", device.type):
        return {"status": "skipped", "reason": "compile is off here"}
    bench._fresh_start(device)  # once: the sides' compiled graphs must all stay
    sides, timed = [], args.steps * args.repeats
    for options in pairs(run, args.device)[name]:
        side = warm(bench, run.with_runtime(**options), device, args.warmup, timed)
        sides.append({"options": options} | side)
    ready = [side for side in sides if "warmed" in side]
    for _ in range(args.repeats):
        for side in ready:
            seconds, side["loss"] = side["warmed"].time(args.steps)
            side.setdefault("times", []).append(seconds)
    for side in ready:
        times = side.pop("times")
        side |= side.pop("warmed").row(statistics.median(times), side.pop("loss"))
        side |= {"repetitions_s": times, "spread": spread(times)}
    first = sides[0].get("step_s")
    over = [side["step_s"] / first if first and "step_s" in side else None for side in sides]
    for side, ratio in zip(sides, over):
        print(f"{name} {side['options']}: {side.get('step_s')} s/step, {ratio} of the first's")
    return {"sides": sides, "over_first": over, "repeats": args.repeats}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["environment", "pair"])
    parser.add_argument("name", nargs="?", help="the pair's name (pair)")
    parser.add_argument("report", help="where the JSON goes")
    for option in ("--preset", "--device"):
        parser.add_argument(option)
    for option in ("--micro-batch", "--steps", "--warmup"):
        parser.add_argument(option, type=int)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (pair)")
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
