"""The stages of the GPU validation (docs/gpu.md), run by benchmarks/gpu/validate.sh.

  A  the environment; the auto micro-batch probe of the paper's model, compiled as training runs
     it; the baseline and residual_gelu timed at that micro-batch with the profiler's breakdown
     (tokens/s, MFU, the step-time ratio, peak memory); Table 1's GPU-hours at that throughput
  B  the before/after pairs that decide the defaults (loss chunks, fused projection, attention
     backend), each pair timed side by side in one process
  C  a paper-size run on synthetic tokens, 30 steps whole and stopped by a signal after step 20
     (exit 75) then resumed: peak memory, checkpoint size, the resumed losses against the whole
     run's
  D  optional, slow (may take two commands): `pytest -m gpu` (with the paper-size probe test),
     every Table 1 row and `repro describe --bench`, the max-autotune pair

Every stage runs on a fresh node from the repository alone and reads no other stage's files: its
micro-batch is --micro-batch N, else a quick probe of its own (A's: the compiled probe it measures;
B-D's: an eager probe, seconds long, whose peak memory is above the compiled model's). A stage's
whole output is <stage>.json and <stage>.log in one folder (--out, default results/bench/<gpu>/),
both rewritten as it goes (benchmarks/gpu/steps.py). `--device cpu` runs every stage at the tiny
preset's size, which is how CI checks this script end to end.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
from steps import Stage

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRATCH = Path(os.environ.get("REPRO_VALIDATE_SCRATCH", HERE / ".cache"))
EXPERIMENTS = ["baseline", "resgelu-lr3e-3"]  # the paper's pair: Table 1's cost comparison
RESUMED = "resgelu-lr3e-3"


def repro(*args: str) -> list[str]:
    return [sys.executable, "-m", "repro", *args]


def measure(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "measure.py"), *args]


def open_stage(name: str, args) -> tuple[Stage, Path]:
    """The stage's record and log in args.out, and an empty scratch folder for its children."""
    scratch = SCRATCH / f"{name}-{args.device.replace(':', '')}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    about = {"device": args.device, "preset": args.preset, "budget_s": args.budget}
    return Stage(name, args.out, args.budget, args.skip, about), scratch


def merged(outcome: dict, report: Path) -> dict:
    """A step's outcome with what its child wrote to `report`, if it got that far."""
    return outcome | json.loads(report.read_text()) if report.exists() else outcome


def environment(s: Stage, scratch: Path) -> None:
    report = scratch / "environment.json"
    s.note("environment", merged(s.run("environment", measure("environment", str(report))), report))


def bench(s: Stage, key: str, args, scratch: Path, *options: str) -> dict:
    """`repro bench` at the stage's sizes as step `key`; its rows and ratios into the record."""
    report = scratch / f"{key}.json"
    command = repro("bench", "--preset", args.preset, "--device", args.device, *options)
    outcome = s.run(key, command + ["--json", str(report)])
    if report.exists():
        data = json.loads(report.read_text())
        outcome |= {k: data[k] for k in ("device", "torch_version", "fastest", "step_time_ratios")}
        s.note(key, outcome)
    return outcome


def micro_batch(s: Stage, args, scratch: Path, compiled: bool) -> int | None:
    """--micro-batch, else the auto micro-batch's probe of the paper's model in a step of its own
    (`repro bench` with the probe and one step); compiled: as training probes (minutes cold),
    else eagerly (seconds; eager's peak memory is the larger, so the size fits compiled too)."""
    if args.micro_batch:
        chosen = args.micro_batch
    else:
        compile = [] if compiled else ["--no-compile"]
        options = ["--experiment", RESUMED, *compile, "--steps", "1", "--warmup", "0"]
        rows = bench(s, "probe", args, scratch, *options).get("fastest", [])
        chosen = rows[0]["train_micro_batch"] if rows else None
    s.record["micro_batch"] = chosen
    s.say(f"micro-batch: {chosen}")
    return chosen


def timing(args, mb: int) -> list[str]:
    return [
        "--train-micro-batch",
        str(mb),
        "--steps",
        str(args.steps),
        "--warmup",
        str(args.warmup),
    ]


def pair(s: Stage, name: str, args, scratch: Path, mb: int) -> None:
    report = scratch / f"{name}.json"
    sizes = ["--micro-batch", str(mb), "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command = measure("pair", name, str(report), "--preset", args.preset, "--device", args.device)
    s.note(name, merged(s.run(name, command + sizes, minimum=60), report))


def describe(s: Stage, args, bench_report: Path) -> None:
    command = repro("describe", "--preset", args.preset, "--group", "table1")
    s.run("describe", command + ["--bench", str(bench_report)], minimum=10)


def stage_a(args) -> int:
    s, scratch = open_stage("A", args)
    environment(s, scratch)
    mb = micro_batch(s, args, scratch, compiled=True)
    if mb is not None:
        options = sum((["--experiment", e] for e in EXPERIMENTS), []) + timing(args, mb)
        bench(s, "table1_pair", args, scratch, *options, "--breakdown")
        describe(s, args, scratch / "table1_pair.json")
    return s.finish()


def stage_b(args) -> int:
    s, scratch = open_stage("B", args)
    environment(s, scratch)
    mb = micro_batch(s, args, scratch, compiled=False)
    for name in ("loss_chunks", "fused_projection", "attention") if mb else ():
        pair(s, name, args, scratch, mb)
    return s.finish()


def stage_c(args) -> int:
    s, scratch = open_stage("C", args)
    environment(s, scratch)
    mb = micro_batch(s, args, scratch, compiled=False)
    if mb is not None:
        preset = rehearsal_preset(args.preset, scratch, mb)
        data = write_tokens(scratch / "data", args.tokens)
        indices = scratch / "indices"
        index = ["indices", "--preset", str(preset), "--data", str(data), "--out", str(indices)]
        s.run("indices", repro(*index))
        train = ["train", "--preset", str(preset), "--experiment", RESUMED, "--data", str(data)]
        train += ["--indices", str(indices), "--device", args.device]
        # The stopped leg succeeds by checkpointing and exiting 75 (a scheduler's requeue).
        for key, name, stop in (
            ("whole", "whole", -1),
            ("stopped", "split", 20),
            ("resumed", "split", -1),
        ):
            report = scratch / f"{key}.json"
            leg = [sys.executable, str(HERE / "train_leg.py"), str(report), str(stop), "--"]
            outcome = s.run(
                key, leg + train + ["--out", str(scratch / name)], expect=75 if stop >= 0 else 0
            )
            s.note(key, merged(outcome, report))
        resume(s, scratch / "split", scratch / "whole", args.device)
    return s.finish()


def stage_d(args) -> int:
    s, scratch = open_stage("D", args)
    environment(s, scratch)
    tests = ["-m", "pytest", "-m", "gpu", "tests", "-q", "-rA", "-p", "no:cacheprovider"]
    if importlib.util.find_spec("pytest_timeout"):  # a GPU node's; a hung test ends alone
        tests.append(f"--timeout={args.test_timeout}")
    s.run("gpu_tests", [sys.executable, *tests])
    mb = micro_batch(s, args, scratch, compiled=False)
    if mb is not None:
        bench(s, "table1", args, scratch, "--group", "table1", *timing(args, mb))
        describe(s, args, scratch / "table1.json")
        pair(s, "inductor_mode", args, scratch, mb)
    return s.finish()


def write_tokens(directory: Path, tokens: int) -> Path:
    """Random token files and their manifest, as `repro prepare` lays them out."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", tokens), ("val", tokens // 10)):
        data = rng.integers(0, 50257, n, dtype=np.uint16).tobytes()
        (directory / f"{split}.bin").write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        splits[split] = {
            "file": f"{split}.bin",
            "documents": n // 1000,
            "tokens": n,
            "sha256": digest,
        }
    manifest = {"source": {"kind": "synthetic"}, "tokenizer": {"name": "gpt2"}, "splits": splits}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


def rehearsal_preset(base: str, directory: Path, mb: int) -> Path:
    """A copy of preset `base` for a 30-step run at micro-batch `mb`: evaluations and checkpoints
    every 10 steps, a report.table_step the run reaches."""
    data = yaml.safe_load((REPO / "config" / "presets" / f"{base}.yaml").read_text())
    train = data["train"]
    train |= {"max_step": 30, "warmup_steps": 5, "decay_steps": 30, "eval_interval": 10}
    train |= {"eval_sequences": 2 * train["eval_micro_batch"], "eval_rows": 4}
    runtime = {"train_micro_batch": mb, "checkpoint_interval": 10, "log_interval": 5}
    data["runtime"] = data.get("runtime", {}) | runtime
    data["report"] = {"table_step": 30}
    data["description"] = f"{base} for 30 steps: benchmarks/gpu/stages.py's stage C"
    path = directory / f"{base}-rehearsal.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def read_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def compare_losses(resumed: list[dict], whole: list[dict]) -> dict:
    """The resumed run's losses against the whole run's, step by step."""
    columns = ["train_loss", "eval_train_loss", "eval_val_loss"]
    differences, identical = [], True
    for ours, theirs in zip(resumed, whole):
        for column in columns:
            if ours.get(column, "") == theirs.get(column, "") == "":
                continue
            identical &= ours[column] == theirs[column]
            a, b = float(ours[column]), float(theirs[column])
            differences.append(abs(a - b) / max(abs(b), 1e-12))
    return {
        "same_steps": [r["step"] for r in resumed] == [r["step"] for r in whole],
        "bit_identical": identical,
        "largest_relative_difference": max(differences, default=None),
    }


def resume(s: Stage, split: Path, whole: Path, device: str) -> None:
    """Step `resume`: the stopped and resumed run against the whole one (bit for bit on CPU)."""
    if not ((whole / "metrics.csv").exists() and (split / "metrics.csv").exists()):
        s.note("resume", {"status": "skipped", "reason": "a leg left no metrics.csv"})
        return
    rows = read_rows(whole)
    comparison = compare_losses(read_rows(split), rows)
    ok = comparison["same_steps"] and (device != "cpu" or comparison["bit_identical"])
    times = [float(r["step_time_s"]) for r in rows]
    s.note(
        "resume",
        {"status": "ok" if ok else "failed"}
        | comparison
        | {
            "train_micro_batch": json.loads((whole / "run.json").read_text())["train_micro_batch"],
            "checkpoint_bytes": (whole / "ckpt.pt").stat().st_size,
            "first_step_time_s": times[0],  # the compilation's, mostly
            "median_step_time_s": float(np.median(times[1:])),
        },
    )
    s.say(f"resume: {s.record['steps']['resume']}")


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


STAGES = {"A": stage_a, "B": stage_b, "C": stage_c, "D": stage_d}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=list(STAGES))
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, help="default results/bench/<gpu> (or cpu)")
    parser.add_argument(
        "--budget", type=float, help="seconds per stage (default 510 on a GPU, 3600 on CPU)"
    )
    parser.add_argument(
        "--micro-batch", type=int, help="the training micro-batch (default: the stage's probe)"
    )
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        metavar="STEP",
        help="steps not to run, their earlier outcomes kept (their keys in the stage's JSON, "
        "e.g. gpu_tests inductor_mode): to run what a stage's budget left out",
    )
    args = parser.parse_args(argv)
    cpu = args.device == "cpu"
    # The sizes: the paper's on a GPU; the tiny preset's on CPU, which runs every stage in seconds.
    args.preset = "tiny" if cpu else "paper"
    args.budget = args.budget or (3600 if cpu else 510)  # a GPU window's command: 10 minutes
    args.steps, args.warmup = (1, 1) if cpu else (8, 2)
    args.tokens = 50_000 if cpu else 20_000_000
    args.test_timeout = 120
    args.out = args.out or REPO / "results" / "bench" / device_folder(args.device)
    return STAGES[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
