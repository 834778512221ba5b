"""The three stages of the GPU validation (docs/gpu.md), run by benchmarks/gpu/validate.sh.

  A  the environment, the GPU tests (`pytest -m gpu`) and a micro-batch sweep of the baseline and
     residual_gelu (the auto micro-batch, then fixed sizes): A.json, A-sweep-*.json
  B  `repro bench` of Table 1 at the sweep's fastest micro-batch with the profiler's breakdown, then
     the before/after pairs that decide the defaults, each pair timed side by side in one process:
     B-table1.json, B.json
  C  a paper-size run on synthetic tokens: 30 steps with the auto micro-batch, one run whole, one
     stopped by a signal after step 20 (exit 75) and resumed; peak memory, checkpoint size, the
     resumed losses against the whole run's, `repro describe --bench`: C.json

Each stage writes its JSON and appends everything it prints to validate.log, all in one folder
(default results/bench/<device>/). A stage keeps to a time budget (--budget, on a GPU 8.5 minutes):
what would start after it is recorded as skipped, never run. Every step's outcome is recorded,
failures included; the exit status is 1 when any failed. `--device cpu` runs every stage at the
tiny preset's size, which is how CI checks this script end to end.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import torch
import yaml

REPO = Path(__file__).resolve().parents[2]
SCRATCH = Path(os.environ.get("REPRO_VALIDATE_SCRATCH", Path(__file__).parent / ".cache"))
EXPERIMENTS = ["baseline", "resgelu-lr3e-3"]  # the sweep's and stage C's: the paper's pair
RESUMED = "resgelu-lr3e-3"
# Every module the training path imports: one that fails to import is found before any timing.
GPU_PATH = [
    "repro.cli",
    "repro.config",
    "repro.train",
    "repro.step",
    "repro.model",
    "repro.checkpoint",
    "repro.evaluate",
    "repro.data.batches",
    "repro.data.indices",
    "repro.data.tokens",
    "repro.perf.bench",
    "repro.perf.cost",
    "repro.runtime.device",
    "repro.runtime.distributed",
    "repro.runtime.fit",
    "repro.runtime.gpus",
    "repro.runtime.lock",
    "repro.runtime.preemption",
]


class Stage:
    """One stage's clock, log and record."""

    def __init__(self, name: str, args):
        self.name, self.args, self.began = name, args, time.monotonic()
        self.out = args.out
        self.out.mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / "validate.log", "a")
        self.record = {"stage": name, "device": args.device, "preset": args.preset, "steps": {}}
        self.say(f"=== stage {name} on {args.device} ({args.preset}), {time.ctime()}")

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def left(self) -> float:
        return self.args.budget - (time.monotonic() - self.began)

    def step(self, key: str, outcome: dict) -> dict:
        """Record a step's outcome: a dict with a status, ok, skipped or failed."""
        self.record["steps"][key] = outcome
        return outcome

    def skipped(self, key: str, minimum: float) -> bool:
        """Whether step `key` is not to run: named by --skip, or less than `minimum` seconds
        of the budget left. Recorded as skipped."""
        reason = "--skip" if key in self.args.skip else None
        reason = reason or ("stage time budget spent" if self.left() < minimum else None)
        if reason:
            self.say(f"{key}: skipped ({reason})")
            self.step(key, {"status": "skipped", "reason": reason})
        return reason is not None

    def run(self, key: str, command: list[str], expect: int = 0, minimum: float = 30) -> dict:
        """Run a command within the budget's remainder, its output into the log; `expect`: the
        exit status that is success."""
        if self.skipped(key, minimum):
            return self.record["steps"][key]
        self.say(f"$ {' '.join(command)}")
        began = time.monotonic()
        process = subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            for line in process.stdout:
                self.say(line.rstrip("\n"))
            code = process.wait(timeout=max(self.left(), 1))
        except subprocess.TimeoutExpired:
            process.kill()
            code = "timed out"
        outcome = {"status": "ok" if code == expect else "failed", "exit": code}
        return self.step(key, outcome | {"seconds": round(time.monotonic() - began, 1)})

    def finish(self) -> int:
        """Write the stage's JSON (a step skipped by --skip keeps an earlier run's outcome)."""
        path = self.out / f"{self.name}.json"
        earlier = json.loads(path.read_text())["steps"] if path.exists() else {}
        for key, outcome in self.record["steps"].items():
            if outcome.get("reason") == "--skip" and key in earlier:
                self.record["steps"][key] = earlier[key]
        self.record["seconds"] = round(time.monotonic() - self.began, 1)
        failed = [
            k for k, v in self.record["steps"].items() if v["status"] not in ("ok", "skipped")
        ]
        self.record["failed_steps"] = failed
        path.write_text(json.dumps(self.record, indent=2) + "\n")
        summary = f"failed: {', '.join(failed)}" if failed else "no step failed"
        self.say(f"=== stage {self.name}: {path}, {self.record['seconds']} s, {summary}")
        self.log.close()
        return 1 if failed else 0


def repro(*args: str) -> list[str]:
    return [sys.executable, "-m", "repro", *args]


def environment() -> dict:
    """Versions of what the GPU path runs on, and whether each of its modules imports."""
    env = {
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
    env["imports"] = imports
    return env


def test_outcomes(junit: Path) -> dict:
    """Counts and each test's outcome from pytest's JUnit XML."""
    if not junit.exists():
        return {}
    outcomes = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[name] = kinds[0] if kinds else "passed"
    counts = {
        k: list(outcomes.values()).count(k) for k in ("passed", "failure", "error", "skipped")
    }
    return {"counts": counts, "tests": outcomes}


def stage_a(args) -> int:
    s = Stage("A", args)
    env = s.step("environment", {"status": "ok"} | environment())
    if any(v != "ok" for v in env["imports"].values()):
        env["status"] = "failed"
    for module, outcome in env["imports"].items():
        s.say(f"import {module}: {outcome}")
    junit = s.out / "A-tests.xml"
    tests = s.run(
        "gpu_tests",
        [sys.executable, *"-m pytest -m gpu tests -q -rA -p no:cacheprovider".split()]
        + [f"--timeout={args.test_timeout}", f"--junitxml={junit}"],
    )
    tests |= test_outcomes(junit)
    junit.unlink(missing_ok=True)
    # The auto micro-batch first (`repro bench`'s default: the probe's choice for each model),
    # then fixed sizes: the probe's compiled graphs and these are the cache stages B and C use.
    for size in ["auto", *args.sweep]:
        path = s.out / f"A-sweep-{size}.json"
        sizes = [] if size == "auto" else ["--train-micro-batch", size]
        outcome = s.run(
            f"sweep_{size}",
            repro(
                "bench",
                "--preset",
                args.preset,
                "--device",
                args.device,
                *sizes,
                *sum((["--experiment", e] for e in EXPERIMENTS), []),
                "--steps",
                str(args.steps),
                "--warmup",
                str(args.warmup),
                "--json",
                str(path),
            ),
        )
        if path.exists():
            outcome["rows"] = json.loads(path.read_text())["results"]
    s.record["chosen_micro_batch"] = chosen_micro_batch(s.record["steps"])
    s.say(f"fastest micro-batch of the sweep: {s.record['chosen_micro_batch']}")
    return s.finish()


def chosen_micro_batch(steps: dict) -> int | None:
    """The micro-batch with the least summed step time of the sweep's experiments."""
    totals: dict[int, list[float]] = {}
    for key, outcome in steps.items():
        for row in outcome.get("rows", []) if key.startswith("sweep_") else []:
            totals.setdefault(row["train_micro_batch"], []).append(row["step_s"])
    complete = {mb: sum(t) for mb, t in totals.items() if len(t) == len(EXPERIMENTS)}
    return min(complete, key=complete.get) if complete else None


def pairs(device: str) -> list[tuple[str, dict, dict]]:
    """The before/after pairs that decide the defaults: (name, before, after)."""
    cuda = device.startswith("cuda")
    attention = "CUDNN_ATTENTION" if cuda else "MATH"  # CPU has no cuDNN; flash vs math there
    return [
        ("loss_chunks", {"loss_chunks": 1}, {"loss_chunks": 8}),
        ("fused_projection", {"fused": True}, {"fused": False}),
        ("attention", {"attention": ["FLASH_ATTENTION"]}, {"attention": [attention]}),
        # max-autotune without CUDA graphs: inductor tries Triton templates for every matmul.
        ("inductor_mode", {"inductor": None}, {"inductor": {"max_autotune": True}}),
    ]


def time_pair(run, device, before: dict, after: dict, args) -> dict:
    """Both sides of a pair in this one process, one after the other; the step-time ratio."""
    from repro.perf import bench
    from repro.runtime.fit import out_of_memory

    rows = []
    for side in (before, after):
        options = dict(side)
        # Runtime settings change the run; the others are time_steps' own options.
        sized = run.with_runtime(
            loss_chunks=options.pop("loss_chunks", None),
            fused_projection=options.pop("fused", None),
        )
        try:
            rows.append(bench.time_steps(sized, device, args.steps, args.warmup, **options))
        except RuntimeError as error:
            if not out_of_memory(error):
                raise
            rows.append({"out_of_memory": True, "options": side})
    ratio = None
    if all("step_s" in r for r in rows):
        ratio = rows[1]["step_s"] / rows[0]["step_s"]
    return {"before": rows[0], "after": rows[1], "after_over_before": ratio}


def stage_b(args) -> int:
    from repro.config import load_run
    from repro.perf.bench import default_micro_batch
    from repro.runtime.device import resolve_device

    s = Stage("B", args)
    device = resolve_device(args.device)
    run = load_run(args.preset, RESUMED)
    # Stage A's choice; without it, what training would use (the probe's, on a GPU).
    micro_batch = args.micro_batch or _from_stage_a(args.out)
    micro_batch = micro_batch or default_micro_batch(run, device)
    s.record["micro_batch"] = micro_batch
    run = run.with_runtime(train_micro_batch=micro_batch)
    sizes = ["--train-micro-batch", str(micro_batch)]
    table1 = s.out / "B-table1.json"
    s.run(
        "table1",
        repro(
            "bench",
            "--preset",
            args.preset,
            "--device",
            args.device,
            "--group",
            "table1",
            *sizes,
            "--steps",
            str(args.steps),
            "--warmup",
            str(args.warmup),
            "--breakdown",
            "--json",
            str(table1),
        ),
    )
    for name, before, after in pairs(args.device):
        if name == "inductor_mode" and not _compiles(run, device):
            s.step(name, {"status": "skipped", "reason": "compile is off here"})
            continue
        if s.skipped(name, minimum=60):
            continue
        s.say(f"pair {name}: {before} -> {after}")
        try:
            outcome = {"status": "ok"} | time_pair(run, device, before, after, args)
        except Exception as e:  # noqa: BLE001 (recorded; the next pair still runs)
            outcome = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
        s.say(f"pair {name}: after / before = {outcome.get('after_over_before')}")
        s.step(name, outcome)
    return s.finish()


def _from_stage_a(out: Path) -> int | None:
    path = out / "A.json"
    return json.loads(path.read_text()).get("chosen_micro_batch") if path.exists() else None


def _compiles(run, device) -> bool:
    return run.runtime.enabled("compile", device.type)


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


def rehearsal_preset(base: str, directory: Path) -> Path:
    """A copy of preset `base` for a 30-step run: evaluations and checkpoints every 10 steps,
    the auto micro-batch, a report.table_step the run reaches."""
    from repro.config import config_dir

    data = yaml.safe_load((config_dir() / "presets" / f"{base}.yaml").read_text())
    train = data["train"]
    train |= {"max_step": 30, "warmup_steps": 5, "decay_steps": 30, "eval_interval": 10}
    train |= {"eval_sequences": 2 * train["eval_micro_batch"], "eval_rows": 4}
    data["runtime"] = data.get("runtime", {}) | {
        "train_micro_batch": "auto",
        "checkpoint_interval": 10,
        "log_interval": 5,
    }
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


def stage_c(args) -> int:
    s = Stage("C", args)
    scratch = SCRATCH / f"stage-c-{args.device.replace(':', '')}"
    if scratch.exists():
        import shutil

        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    preset = rehearsal_preset(args.preset, scratch)
    data = write_tokens(scratch / "data", args.tokens)
    indices = scratch / "indices"
    s.run(
        "indices",
        repro("indices", "--preset", str(preset), "--data", str(data), "--out", str(indices)),
    )
    common = [
        "--preset",
        str(preset),
        "--experiment",
        RESUMED,
        "--data",
        str(data),
        "--indices",
        str(indices),
        "--device",
        args.device,
    ]
    leg = lambda name, stop: [
        sys.executable,
        str(Path(__file__).parent / "train_leg.py"),
        str(scratch / f"{name}.json"),
        str(stop),
        "--",
        "train",
        *common,
        "--out",
        str(scratch / name.split("-")[0]),
    ]
    legs = {"whole": ("whole", -1), "stopped": ("split-stopped", 20), "resumed": ("split", -1)}
    for key, (name, stop) in legs.items():
        # A run stopped by a signal checkpoints and exits REQUEUE_EXIT: the stopped leg's success.
        outcome = s.run(key, leg(name, stop), expect=75 if stop >= 0 else 0)
        report = scratch / f"{name}.json"
        if report.exists():
            outcome |= json.loads(report.read_text())
    whole, split = scratch / "whole", scratch / "split"
    if (whole / "metrics.csv").exists() and (split / "metrics.csv").exists():
        rows = read_rows(whole)
        comparison = compare_losses(read_rows(split), rows)
        status = "ok" if comparison["same_steps"] else "failed"
        if args.device == "cpu" and not comparison["bit_identical"]:
            status = "failed"  # exact resume holds bit for bit on CPU
        record = json.loads((whole / "run.json").read_text())
        times = [float(r["step_time_s"]) for r in rows]
        s.step(
            "resume",
            {"status": status}
            | comparison
            | {
                "train_micro_batch": record["train_micro_batch"],
                "checkpoint_bytes": (whole / "ckpt.pt").stat().st_size,
                "first_step_time_s": times[0],
                "median_step_time_s": float(np.median(times[1:])),
            },
        )
        s.say(f"resume: {s.record['steps']['resume']}")
    table1 = args.out / "B-table1.json"
    if table1.exists():
        s.run(
            "describe",
            repro(
                "describe",
                "--preset",
                args.describe_preset,
                "--group",
                "table1",
                "--bench",
                str(table1),
            ),
        )
    else:
        s.step("describe", {"status": "skipped", "reason": f"no {table1}: run stage B first"})
    return s.finish()


def device_folder(device: str) -> str:
    """results/bench/<this>: the GPU's name in lower case and dashes, or cpu."""
    if device == "cpu":
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(0).lower()).strip("-")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stage", choices=["A", "B", "C"])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--out", type=Path, help="default results/bench/<device>")
    parser.add_argument(
        "--budget", type=float, help="seconds per stage (default 510 on a GPU, 3600 on CPU)"
    )
    parser.add_argument("--micro-batch", type=int, help="stage B's (default: stage A's choice)")
    parser.add_argument(
        "--skip",
        nargs="+",
        default=[],
        metavar="STEP",
        help="steps not to run (their keys in the stage's JSON, e.g. gpu_tests sweep_48 "
        "inductor_mode): to run what a stage's budget left out, the stage again without the rest",
    )
    args = parser.parse_args(argv)
    cpu = args.device == "cpu"
    # The sizes: the paper's on a GPU; the tiny preset's on CPU, which runs every stage in seconds.
    args.preset = "tiny" if cpu else "paper"
    args.budget = args.budget or (3600 if cpu else 510)  # a GPU window's command: 10 minutes
    args.describe_preset = args.preset
    args.sweep = ["1", "2"] if cpu else ["24", "48"]
    args.steps, args.warmup = (1, 1) if cpu else (10, 3)
    args.tokens = 50_000 if cpu else 20_000_000
    args.test_timeout = 300
    args.out = args.out or REPO / "results" / "bench" / device_folder(args.device)
    return {"A": stage_a, "B": stage_b, "C": stage_c}[args.stage](args)


if __name__ == "__main__":
    sys.exit(main())
