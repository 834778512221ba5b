"""The stages of the GPU validation (docs/gpu.md), run by benchmarks/gpu/validate.sh.

  window  for a GPU window of 15 minutes, most valuable first (window.py): the environment and
          the compile toolchain; `repro train` of residual_gelu at the paper's shape on synthetic
          tokens, 21 steps with evaluations and checkpoints (uncompiled from there on if its graph
          fails to compile); the baseline and residual_gelu timed at the same micro-batch, each
          in its own process; a run stopped by SIGTERM and resumed, against the whole one; last,
          if the budget allows, the auto micro-batch probe as training runs it
  pairs   the second command, the measurements that decide the defaults: where a step's time
          goes (both models, `repro bench --breakdown`), then each comparison (measure.py's
          pairs(): CUDA graphs, a larger micro-batch, the fused projection, flash against cuDNN,
          the fused loss off and by its kernels), its sides warmed in one process and timed in
          3 interleaved rounds
  extras  slow (may take two commands): `pytest -m gpu` (with the paper-size probe test), every
          Table 1 row and `repro describe --bench`
  dag     the Table 1 workflow end to end through its own rules at preset gpu-short (dag.py)

The window's essentials run at a micro-batch safe by construction (runs.logits_safe_micro_batch);
the pairs and extras at --micro-batch N, else that same one. A stage's output is <stage>.json and
<stage>.log in one folder (--out, default benchmarks/results/<gpu-folder>/), rewritten as it goes
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
import time
from pathlib import Path

from runs import RESUME_TOLERANCE, safe_micro_batch
from steps import Stage

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRATCH = Path(os.environ.get("REPRO_VALIDATE_SCRATCH", HERE / ".cache"))
EXPERIMENTS = ["baseline", "resgelu-lr3e-3"]  # the paper's pair: Table 1's cost comparison
TRAINED = "resgelu-lr3e-3"  # the nonlinear query: what the window trains, stops and resumes
# measure.py's comparisons, in the order the pairs stage runs them: CUDA graphs, a larger
# micro-batch, the fused projection, the attention kernel, the fused loss.
PAIRS = ["compile_mode", "micro_batch", "fused_projection", "attention", "fused_loss"]


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
    # When and under what load: benchmarks/gpu/summary.py puts both beside the figures.
    about["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    about["load"] = os.getloadavg()
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
    """`repro bench` at the stage's sizes as step `key`; its rows and ratios into the record, and
    its report beside the record as <stage>-<key>.json."""
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


def pair(s: Stage, name: str, args, scratch: Path, mb: int) -> None:
    report = scratch / f"{name}.json"
    sizes = [
        "--micro-batch",
        str(mb),
        "--steps",
        str(args.pair_steps),
        "--warmup",
        str(args.warmup),
    ]
    command = measure("pair", name, str(report), "--preset", args.preset, "--device", args.device)
    command += sizes + args.compile
    outcome = merged(s.run(name, command, minimum=60, limit=args.limits["pair"]), report)
    s.note(name, outcome)
    keep(s, report, f"{name}.json")


def stage_pairs(args) -> int:
    """The measurements that decide the defaults, most telling first: where a step's time goes
    (both models, `repro bench --breakdown`), then each comparison of measure.py's pairs()."""
    s, scratch = open_stage("pairs", args)
    environment(s, args, scratch)
    mb = s.record["micro_batch"] = args.micro_batch or safe_micro_batch(args.preset)
    both = [*sum((["--experiment", e] for e in EXPERIMENTS), []), *timing(args, mb)]
    bench(
        s, "breakdown", args, scratch, *both, "--breakdown", minimum=60, limit=args.limits["pair"]
    )
    for name in PAIRS:
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
    return s.finish()


def device_folder(device: str) -> str:
    """benchmarks/results/<gpu-folder>: the GPU's name in lower case and dashes (as nvidia-smi and
    torch name it), or cpu. Asked of nvidia-smi: this process never touches the GPU itself."""
    if device == "cpu":
        return "cpu"
    query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"]
    try:
        name = subprocess.run(query, capture_output=True, text=True).stdout.strip()
    except OSError:
        name = ""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "cuda"


STAGES = {"pairs": stage_pairs, "extras": stage_extras}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["window", "dag", *STAGES])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, help="default benchmarks/results/<gpu-folder> (or cpu)")
    parser.add_argument(
        "--budget",
        type=float,
        help="seconds per stage (default on a GPU 560; 3600 on CPU)",
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
    # A GPU window's command: at most 10 minutes; the levers' short second one 5.
    args.budget = args.budget or (3600 if cpu else 560)
    args.steps, args.warmup = (1, 1) if cpu else (6, 2)
    # The pairs: each side timed for 3 rounds of this many steps (4 x 1 s on a GPU).
    args.pair_steps, args.repeats = (1, 3) if cpu else (4, 3)
    args.tokens = 50_000 if cpu else 8_000_000  # the window's 21 steps take 2.6M
    # On a GPU no step may take the window: the most one may take (sized for a cold compile of
    # 150 s, docs/gpu.md), and the least the probe needs.
    gpu_limits = {"train": 330, "pair_baseline": 210, f"pair_{TRAINED}": 150, "leg": 120}
    gpu_limits |= {"probe": 120, "pair": 150}
    args.limits = {k: None for k in gpu_limits} | {"probe": 30} if cpu else gpu_limits
    args.resume_tolerance = 0.0 if cpu else RESUME_TOLERANCE
    args.test_timeout = 120
    args.out = args.out or REPO / "benchmarks" / "results" / f"gpu-{device_folder(args.device)}"
    if args.stage == "window":
        from window import stage_window

        return stage_window(args)
    if args.stage == "dag":
        from dag import stage_dag

        return stage_dag(args)
    return STAGES[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
