"""The stages of the GPU validation (docs/gpu.md), run by benchmarks/gpu/validate.sh.

  window  for a GPU window of 15 minutes, most valuable first: the environment and the compile
          toolchain (uncompiled from there on if compiling fails); `repro train` of residual_gelu
          at the paper's shape on synthetic tokens, 21 steps with evaluations and checkpoints;
          baseline and residual_gelu timed side by side at the same micro-batch; a run stopped by
          SIGTERM and resumed, against the whole one; last, if the budget allows, the auto
          micro-batch probe as training runs it
  pairs   the before/after pairs that decide the defaults (loss chunks, fused projection,
          attention backend), each pair timed side by side in one process
  extras  slow (may take two commands): `pytest -m gpu` (with the paper-size probe test), every
          Table 1 row and `repro describe --bench`, the max-autotune pair

The window's essentials run at a micro-batch safe by construction (runs.logits_safe_micro_batch);
the pairs and extras at --micro-batch N, else that same one. A stage's output is <stage>.json and
<stage>.log in one folder (--out, default results/bench/<gpu>/), rewritten as it goes
(benchmarks/gpu/steps.py), with the window's raw outputs beside them (at most 8 files in all).
`--device cpu` runs a stage at the tiny preset's size, which is how CI checks this script.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from runs import (
    STOP_AFTER,
    compare_losses,
    read_rows,
    safe_micro_batch,
    window_preset,
    write_tokens,
)
from steps import Stage

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRATCH = Path(os.environ.get("REPRO_VALIDATE_SCRATCH", HERE / ".cache"))
EXPERIMENTS = ["baseline", "resgelu-lr3e-3"]  # the paper's pair: Table 1's cost comparison
TRAINED = "resgelu-lr3e-3"  # the nonlinear query: what the window trains, stops and resumes


def repro(*args: str) -> list[str]:
    return [sys.executable, "-m", "repro", *args]


def measure(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "measure.py"), *args]


def open_stage(name: str, args) -> tuple[Stage, Path]:
    """The stage's record and log in args.out, and an empty scratch folder for its children."""
    scratch = SCRATCH / f"{name}-{args.device.replace(':', '')}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    command = " ".join(["benchmarks/gpu/validate.sh", *sys.argv[1:]])
    about = {"command": command, "device": args.device, "preset": args.preset}
    about["budget_s"] = args.budget
    return Stage(name, args.out, args.budget, args.skip, about), scratch


def merged(outcome: dict, report: Path) -> dict:
    """A step's outcome with what its child wrote to `report`, if it got that far."""
    return outcome | json.loads(report.read_text()) if report.exists() else outcome


def keep(s: Stage, source: Path, name: str) -> None:
    """A step's raw output beside the stage's JSON, as <stage>-<name> (a new file: an earlier one,
    or a link, is removed first, never written through)."""
    if source.exists():
        target = s.out / f"{s.name}-{name}"
        target.unlink(missing_ok=True)
        shutil.copyfile(source, target)


def environment(s: Stage, args, scratch: Path) -> None:
    """Step `environment`; where the compile toolchain fails, every later step runs uncompiled."""
    report = scratch / "environment.json"
    command = measure("environment", str(report), "--device", args.device)
    env = s.note("environment", merged(s.run("environment", command, limit=300), report))
    args.compile = []  # the preset's: compiled on CUDA
    if env.get("toolchain", {}).get("status", "ok") != "ok":
        args.compile = ["--no-compile"]
        s.say("compile toolchain failed: every later step runs uncompiled (--no-compile)")
    s.record["compile"] = "off: the toolchain failed" if args.compile else "the preset's"
    s.save()


def bench(s: Stage, key: str, args, scratch: Path, *options, minimum=30, limit=None) -> dict:
    """`repro bench` at the stage's sizes as step `key`; its rows and ratios into the record."""
    report = scratch / f"{key}.json"
    command = repro("bench", "--preset", args.preset, "--device", args.device, *args.compile)
    command += [*options, "--json", str(report)]
    outcome = s.run(key, command, minimum=minimum, limit=limit)
    if report.exists():
        data = json.loads(report.read_text())
        outcome |= {k: data[k] for k in ("device", "torch_version", "fastest", "step_time_ratios")}
        s.note(key, outcome)
        keep(s, report, f"{key}.json")
    return outcome


def timing(args, mb: int) -> list[str]:
    sizes = ["--train-micro-batch", str(mb), "--steps", str(args.steps)]
    return sizes + ["--warmup", str(args.warmup)]


def leg(s: Stage, key: str, train: list[str], run_dir: Path, stop: int, limit) -> dict:
    """`repro train` as step `key` into `run_dir` (train_leg.py: stopped after step `stop` when
    it is 0 or more, which must then checkpoint and exit 75, as under a scheduler's requeue)."""
    report = run_dir.with_name(f"{key}.json")
    command = [sys.executable, str(HERE / "train_leg.py"), str(report), str(stop), "--"]
    command += train + ["--out", str(run_dir)]
    outcome = s.run(key, command, expect=75 if stop >= 0 else 0, minimum=60, limit=limit)
    outcome = merged(outcome, report)
    if outcome["status"] == "ok" and outcome.get("loss_fell") is False and stop < 0:
        outcome |= {"status": "failed", "reason": "the training loss did not fall"}
    return s.note(key, outcome)


def resume(s: Stage, split: Path, whole: Path, device: str) -> None:
    """Step `resume`: the stopped and resumed run against the whole one (bit for bit on CPU)."""
    if not ((whole / "metrics.csv").exists() and (split / "metrics.csv").exists()):
        s.note("resume", {"status": "skipped", "reason": "a leg left no metrics.csv"})
        return
    comparison = compare_losses(read_rows(split), read_rows(whole))
    ok = comparison["same_steps"] and (device != "cpu" or comparison["bit_identical"])
    size = (whole / "ckpt.pt").stat().st_size if (whole / "ckpt.pt").exists() else None
    s.note("resume", {"status": "ok" if ok else "failed", "checkpoint_bytes": size} | comparison)
    s.say(f"resume: {s.record['steps']['resume']}")


def stage_window(args) -> int:
    s, scratch = open_stage("window", args)
    environment(s, args, scratch)
    preset, mb = window_preset(args.preset, scratch)
    s.record["micro_batch"] = mb
    s.say(f"micro-batch: {mb} (the largest dividing the batch under 2^31 logits)")
    data = write_tokens(scratch / "data", args.tokens)
    indices = scratch / "indices"
    s.run(
        "indices",
        repro("indices", "--preset", str(preset), "--data", str(data), "--out", str(indices)),
    )
    train = ["train", "--preset", str(preset), "--experiment", TRAINED, "--data", str(data)]
    train += ["--indices", str(indices), "--device", args.device, *args.compile]
    limits = args.limits
    leg(s, "train", train, scratch / "whole", -1, limits["train"])
    keep(s, scratch / "whole" / "metrics.csv", "train-metrics.csv")
    pair = sum((["--experiment", e] for e in EXPERIMENTS), []) + timing(args, mb)
    bench(s, "pair", args, scratch, *pair, minimum=60, limit=limits["pair"])
    leg(s, "stopped", train, scratch / "split", STOP_AFTER, limits["leg"])
    leg(s, "resumed", train, scratch / "split", -1, limits["leg"])
    keep(s, scratch / "split" / "metrics.csv", "resumed-metrics.csv")
    resume(s, scratch / "split", scratch / "whole", args.device)
    # Last, only where the budget allows: the auto micro-batch's probe as training runs it.
    probe = ["--experiment", TRAINED, "--steps", "1", "--warmup", "0"]
    bench(s, "probe", args, scratch, *probe, minimum=limits["probe"])
    return s.finish()


def pair(s: Stage, name: str, args, scratch: Path, mb: int) -> None:
    report = scratch / f"{name}.json"
    sizes = ["--micro-batch", str(mb), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command = measure("pair", name, str(report), "--preset", args.preset, "--device", args.device)
    s.note(name, merged(s.run(name, command + sizes + args.compile, minimum=60), report))


def stage_pairs(args) -> int:
    s, scratch = open_stage("pairs", args)
    environment(s, args, scratch)
    mb = s.record["micro_batch"] = args.micro_batch or safe_micro_batch(args.preset)
    for name in ("loss_chunks", "fused_projection", "attention"):
        pair(s, name, args, scratch, mb)
    return s.finish()


def stage_extras(args) -> int:
    s, scratch = open_stage("extras", args)
    environment(s, args, scratch)
    tests = ["-m", "pytest", "-m", "gpu", "tests", "-q", "-rA", "-p", "no:cacheprovider"]
    if importlib.util.find_spec("pytest_timeout"):  # a GPU node's; a hung test ends alone
        tests.append(f"--timeout={args.test_timeout}")
    s.run("gpu_tests", [sys.executable, *tests])
    mb = s.record["micro_batch"] = args.micro_batch or safe_micro_batch(args.preset)
    bench(s, "table1", args, scratch, "--group", "table1", *timing(args, mb))
    command = repro("describe", "--preset", args.preset, "--group", "table1")
    s.run("describe", command + ["--bench", str(scratch / "table1.json")], minimum=10)
    pair(s, "inductor_mode", args, scratch, mb)
    return s.finish()


def device_folder(device: str) -> str:
    """results/bench/<this>: the GPU's name in lower case and dashes (as nvidia-smi and torch
    name it), or cpu. Asked of nvidia-smi: this process never touches the GPU itself."""
    if device == "cpu":
        return "cpu"
    query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"]
    try:
        name = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    except OSError:
        name = ""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "cuda"


STAGES = {"window": stage_window, "pairs": stage_pairs, "extras": stage_extras}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=list(STAGES))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, help="default results/bench/<gpu> (or cpu)")
    parser.add_argument(
        "--budget", type=float, help="seconds per stage (default 540 on a GPU, 3600 on CPU)"
    )
    parser.add_argument(
        "--micro-batch",
        type=int,
        help="the pairs' and extras' micro-batch (default: the largest under 2^31 logits)",
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        metavar="STEP",
        help="steps not to run, their earlier outcomes kept (their keys in the stage's JSON, "
        "e.g. pair probe): to run what a stage's budget left out",
    )
    args = parser.parse_args(argv)
    cpu = args.device == "cpu"
    # The sizes: the paper's on a GPU; the tiny preset's on CPU, which runs every stage in seconds.
    args.preset = "tiny" if cpu else "paper"
    args.budget = args.budget or (3600 if cpu else 540)  # a GPU window's command: 10 minutes
    args.steps, args.warmup = (1, 1) if cpu else (6, 2)
    args.tokens = 50_000 if cpu else 20_000_000
    # On a GPU no step may take the window: the most one may take, and the least the probe needs.
    gpu_limits = {"train": 270, "pair": 240, "leg": 150, "probe": 120}
    cpu_limits = {"train": None, "pair": None, "leg": None, "probe": 30}
    args.limits = cpu_limits if cpu else gpu_limits
    args.test_timeout = 120
    args.out = args.out or REPO / "results" / "bench" / device_folder(args.device)
    return STAGES[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
