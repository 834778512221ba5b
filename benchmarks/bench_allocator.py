"""Time and resident memory of CPU training under glibc's default malloc and under repro's
(repro.runtime.allocator: freed memory kept within a step, trimmed at its end), side by side.

    python benchmarks/bench_allocator.py [--runs smoke large] [--smoke-steps 101] [--large-steps 4]
                                         [--untrimmed]

Each (run, setting) is one `repro.train.train` in its own process, on random tokens (the allocator
does not care what the tokens are): "smoke" is the smoke preset (101 steps of 2 x 4 sequences of
64 tokens, or its first --smoke-steps); "large" is the smoke model (1.7M parameters, GPT-2's
vocabulary) with the paper's batch of 480 sequences as 40 micro-batches of 12, an evaluation every
second step. The settings of a run train at the same time, so that the machine's load falls on
each alike. Printed per setting: wall seconds per step (metrics.csv's step_time_s), CPU and system
seconds and minor page faults per step (after the first), the peak resident memory (VmHWM) and
the resident memory after the first and last steps' training, then the ratios of repro's setting
to glibc's. --untrimmed adds the setting without the trim at each step's end (to compare).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {
    "glibc": "glibc's defaults",
    "repro": "repro (kept, trimmed each step)",  # repro.runtime.allocator as training applies it
    "untrimmed": "kept, never trimmed",
}


def run_presets(smoke_steps: int, large_steps: int) -> dict[str, dict]:
    """The preset YAML of each run: the smoke preset (cut short), and scaled up."""
    smoke = yaml.safe_load((REPO / "config" / "presets" / "smoke.yaml").read_text())
    smoke["train"]["max_step"] = smoke_steps - 1
    smoke["report"]["table_step"] = min(smoke["report"]["table_step"], smoke_steps - 1)
    last = large_steps - 1
    large = yaml.safe_load(yaml.safe_dump(smoke))
    large["train"].update(
        max_step=last,
        batch_size=480,
        warmup_steps=1,
        decay_steps=last,
        eval_interval=2,
    )
    large["runtime"].update(train_micro_batch=12, checkpoint_interval=last + 1)
    large["report"]["table_step"] = last - last % 2
    return {"smoke": smoke, "large": large}


def write_tokens(data_dir: Path, tokens: int) -> None:
    """Random GPT-2 token files with the manifest `repro prepare` writes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    splits = {}
    for split, n in (("train", tokens), ("val", tokens // 5)):
        array = rng.integers(0, 50257, n, dtype=np.uint16)
        (data_dir / f"{split}.bin").write_bytes(array.tobytes())
        splits[split] = {
            "file": f"{split}.bin",
            "documents": n // 100,
            "tokens": n,
            "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
        }
    manifest = {"source": {"kind": "random"}, "tokenizer": {"name": "gpt2"}, "splits": splits}
    (data_dir / "manifest.json").write_text(json.dumps(manifest))


def child(setting: str, preset: str, data: str, indices: str, out: str) -> None:
    """One training run under `setting`; prints its figures as JSON."""
    import repro.train
    from repro.config import RunConfig, load_experiments, load_preset
    from repro.runtime import allocator

    if setting == "glibc":
        allocator.keep_freed_memory = lambda: False
    if setting == "untrimmed":
        allocator.release_freed_memory = lambda: None
    after_step, usage, train_step = [], [], repro.train.train_step

    def measured_step(*args, **kwargs):
        loss = train_step(*args, **kwargs)  # on the CPU the step has run when this returns
        after_step.append(status_mb("VmRSS"))
        usage.append(resource.getrusage(resource.RUSAGE_SELF))
        return loss

    repro.train.train_step = measured_step
    run = RunConfig(load_preset(preset), load_experiments()["baseline"])
    began = time.perf_counter()
    repro.train.train(run, Path(data), Path(indices), Path(out), device="cpu")
    seconds = time.perf_counter() - began
    with open(Path(out) / "metrics.csv", newline="") as f:
        step_times = [float(row["step_time_s"]) for row in csv.DictReader(f)]
    steps = len(usage) - 1  # from the end of the first step (allocator warm) to the last
    first, last = usage[0], usage[-1]
    print(
        json.dumps(
            {
                "s_per_step": sum(step_times) / len(step_times),
                "cpu_s_per_step": (last.ru_utime + last.ru_stime - first.ru_utime - first.ru_stime)
                / steps,
                "sys_s_per_step": (last.ru_stime - first.ru_stime) / steps,
                "faults_per_step": (last.ru_minflt - first.ru_minflt) / steps,
                "train_s": seconds,
                "peak_mb": status_mb("VmHWM"),
                "rss_after_step_mb": after_step,
            }
        )
    )


def status_mb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(work: Path, name: str, preset: dict, settings: list[str]) -> list[dict]:
    from repro.config import load_preset
    from repro.data.indices import write_indices

    preset_path = work / f"{name}.yaml"
    preset_path.write_text(yaml.safe_dump(preset))
    data, indices = work / "data", work / f"indices-{name}"
    write_indices(load_preset(str(preset_path)), data, indices)
    # The settings run at the same time, so that a machine's load (shared, or busy with
    # anything else) falls on each of them alike.
    children = {
        setting: subprocess.Popen(
            [sys.executable, __file__, "--child", setting, str(preset_path), str(data)]
            + [str(indices), str(work / f"run-{name}-{setting}")],
            stdout=subprocess.PIPE,
            text=True,
        )
        for setting in settings
    }
    results = []
    for setting, child in children.items():
        out, _ = child.communicate()
        if child.returncode:
            raise SystemExit(f"{name} under {setting}: exit status {child.returncode}")
        results.append({"run": name, "setting": setting} | json.loads(out.splitlines()[-1]))
        print(format_row(results[-1]), flush=True)
    return results


HEADER = (
    f"{'run':<6} {'malloc':<33} {'s/step':>7} {'CPU s':>7} {'sys s':>7} {'faults':>8} "
    f"{'peak MB':>8} {'step 1':>7} {'last':>7}"
)


def format_row(r: dict) -> str:
    rss = r["rss_after_step_mb"]
    return (
        f"{r['run']:<6} {SETTINGS[r['setting']]:<33} {r['s_per_step']:>7.3f} "
        f"{r['cpu_s_per_step']:>7.3f} {r['sys_s_per_step']:>7.3f} {r['faults_per_step']:>8,.0f} "
        f"{r['peak_mb']:>8,} {rss[0]:>7,} {rss[-1]:>7,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", choices=["smoke", "large"], default=["smoke", "large"])
    parser.add_argument("--smoke-steps", type=int, default=101, help="steps of the smoke run")
    parser.add_argument("--large-steps", type=int, default=4, help="steps of the large run")
    parser.add_argument("--untrimmed", action="store_true", help="also the untrimmed setting")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    settings = ["glibc", "repro"] + ["untrimmed"] * args.untrimmed
    presets = run_presets(args.smoke_steps, args.large_steps)
    print(
        "per step: wall seconds (metrics.csv), CPU and system seconds and minor page faults "
        "(after the first step); peak resident memory; resident memory after the first and "
        "last steps' training (before the trim), MB"
    )
    print(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_tokens(work / "data", 300_000)
        results = [r for name in args.runs for r in measure(work, name, presets[name], settings)]
    for name in args.runs:
        by = {r["setting"]: r for r in results if r["run"] == name}
        glibc, repro = by["glibc"], by["repro"]
        time_ratio = repro["s_per_step"] / glibc["s_per_step"]
        cpu_ratio = repro["cpu_s_per_step"] / glibc["cpu_s_per_step"]
        print(
            f"{name}: repro / glibc: wall time per step {time_ratio:.2f}, CPU time per step "
            f"{cpu_ratio:.2f}, peak resident memory {repro['peak_mb'] / glibc['peak_mb']:.2f}"
        )


if __name__ == "__main__":
    main()
