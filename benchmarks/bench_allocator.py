"""Peak resident memory and CPU time of CPU training under glibc's malloc as it is, under glibc's
malloc with transparent huge pages, and under the allocator `repro train` runs with (TCMalloc
where installed, else the huge pages: repro.runtime.allocator), side by side.

    python benchmarks/bench_allocator.py [--runs smoke eval-heavy] [--smoke-steps 21]
                                         [--eval-heavy-steps 2] [--eval-batches 200]

Each (run, setting) is one `repro.training.run.train` in its own process, on random tokens (the
allocator
does not care what the tokens are). "smoke" is the smoke preset (2 x 4 sequences of 64 tokens a
step, an evaluation of 4 x 4 sequences per split every 20 steps), its first --smoke-steps steps.
"eval-heavy" is the smoke model (2 layers, d = 32, GPT-2's vocabulary, 1.7M parameters) at the
paper's batch structure: 480 sequences a step as 40 micro-batches of 12, and at step 0 an
evaluation of --eval-batches micro-batches of 12 sequences per split (the paper's 200).
The settings: "glibc", the process as started (REPRO_MALLOC=glibc); "hugepages", the process as
the restart without TCMalloc leaves it (glibc.malloc.hugetlb=1); "repro", the process restarted
as `repro train` restarts itself (allocator.restart_under_allocator). The settings of a
run train at the same time, so that the machine's load falls on each alike. Printed per setting:
the allocator in use, CPU seconds and minor page faults per training step (the steps after the
first, or the one step), CPU seconds of the step-0 evaluation, peak resident memory (VmHWM), then
repro's figures over glibc's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import record
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # this checkout's repro, as the runs' processes have it
SETTINGS = ("glibc", "hugepages", "repro")


def run_presets(smoke_steps: int, eval_heavy_steps: int, eval_batches: int) -> dict[str, dict]:
    """The preset YAML of each run: the smoke preset (cut short), and at the paper's batches."""
    smoke = yaml.safe_load((REPO / "config" / "presets" / "smoke.yaml").read_text())
    smoke["train"]["max_step"] = smoke_steps - 1
    smoke["report"]["table_step"] = 0
    smoke["runtime"]["device"] = "cpu"
    last = eval_heavy_steps - 1
    heavy = yaml.safe_load(yaml.safe_dump(smoke))
    heavy["train"].update(
        max_step=last,
        batch_size=480,
        eval_micro_batch=12,
        eval_sequences=12 * eval_batches,
        warmup_steps=1,
        decay_steps=last + 2,
        eval_interval=last + 1,  # the step-0 evaluation only
        eval_rows=1,
    )
    heavy["runtime"].update(train_micro_batch=12, checkpoint_interval=last + 1)
    return {"smoke": smoke, "eval-heavy": heavy}


def write_tokens(data_dir: Path, tokens: int) -> None:
    """Random GPT-2 token files and their manifest, by the package's writer."""
    from repro.data.tokens import write_token_files

    rng = np.random.default_rng(0)
    counts = {"train": tokens, "val": tokens // 5}
    write_token_files(
        data_dir,
        {split: rng.integers(0, 50257, n, dtype=np.uint16) for split, n in counts.items()},
        documents={split: n // 100 for split, n in counts.items()},
        source={"kind": "random"},
        tokenizer={"name": "gpt2"},
    )


def cpu_faults() -> tuple[float, int]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def child(setting: str, preset: str, data: str, indices: str, out: str) -> None:
    """One training run under `setting`; prints its figures as JSON."""
    from repro.runtime import allocator

    if setting == "repro":
        allocator.restart_under_allocator()  # as `repro train` does: this process, once more
    import repro.training.loop
    import repro.training.run
    from repro.config import load_experiments, load_preset, resolve_run

    steps, evaluations = [], []

    def measured(function, into):
        def call(*args, **kwargs):
            cpu, faults = cpu_faults()
            result = function(*args, **kwargs)  # on the CPU it has run when this returns
            after = cpu_faults()
            into.append((after[0] - cpu, after[1] - faults))
            return result

        return call

    repro.training.loop.train_step = measured(repro.training.loop.train_step, steps)
    repro.training.loop.eval_losses = measured(repro.training.loop.eval_losses, evaluations)
    run = resolve_run(load_preset(preset), load_experiments()["baseline"])
    repro.training.run.train(run, Path(data), Path(indices), Path(out))
    timed = steps[1:] or steps  # after the first (the allocator warm), where there are more
    print(
        json.dumps(
            {
                "allocator": allocator.in_use(),
                "cpu_s_per_step": sum(cpu for cpu, _ in timed) / len(timed),
                "faults_per_step": sum(faults for _, faults in timed) / len(timed),
                "eval_cpu_s": evaluations[0][0],
                "peak_mb": status_mb("VmHWM"),
            }
        )
    )


def status_mb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(work: Path, name: str, preset: dict) -> list[dict]:
    from repro.config import load_preset
    from repro.data.indices import write_indices
    from repro.runtime.allocator import HUGE_PAGES, TUNABLE

    preset_path = work / f"{name}.yaml"
    preset_path.write_text(yaml.safe_dump(preset))
    data, indices = work / "data", work / f"indices-{name}"
    write_indices(load_preset(str(preset_path)), data, indices)
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    env = {k: v for k, v in os.environ.items() if k != "REPRO_MALLOC"} | {"PYTHONPATH": path}
    settings = {  # each setting's environment: glibc's as started, as the restart leaves it
        "glibc": {"REPRO_MALLOC": "glibc"},
        "hugepages": {"GLIBC_TUNABLES": f"{TUNABLE}=1", "REPRO_MALLOC": HUGE_PAGES},
        "repro": {},
    }
    children = {
        setting: subprocess.Popen(
            [sys.executable, __file__, "--child", setting, str(preset_path), str(data)]
            + [str(indices), str(work / f"run-{name}-{setting}")],
            stdout=subprocess.PIPE,
            text=True,
            env=env | settings[setting],
        )
        for setting in SETTINGS
    }
    results = []
    for setting, process in children.items():
        out, _ = process.communicate()
        if process.returncode:
            raise SystemExit(f"{name} under {setting}: exit status {process.returncode}")
        results.append({"run": name, "setting": setting} | json.loads(out.splitlines()[-1]))
        print(format_row(results[-1]), flush=True)
    return results


HEADER = (
    f"{'run':<10} {'setting':<9} {'malloc':<15} {'CPU s/step':>10} {'faults/step':>12} "
    f"{'eval CPU s':>10} {'peak MB':>8}"
)


def format_row(r: dict) -> str:
    return (
        f"{r['run']:<10} {r['setting']:<9} {r['allocator']:<15} {r['cpu_s_per_step']:>10.2f} "
        f"{r['faults_per_step']:>12,.0f} {r['eval_cpu_s']:>10.2f} {r['peak_mb']:>8,}"
    )


def ratios(measured: dict, glibc: dict, setting: str) -> str:
    """One setting's figures over glibc's as started."""
    ratio = {key: measured[key] / glibc[key] for key in ("cpu_s_per_step", "eval_cpu_s", "peak_mb")}
    return (
        f"{setting} / glibc: CPU time per step {ratio['cpu_s_per_step']:.2f}, "
        f"evaluation CPU time {ratio['eval_cpu_s']:.2f}, "
        f"peak resident memory {ratio['peak_mb']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", nargs="+", choices=["smoke", "eval-heavy"], default=["smoke", "eval-heavy"]
    )
    parser.add_argument("--smoke-steps", type=int, default=21, help="steps of the smoke run")
    parser.add_argument("--eval-heavy-steps", type=int, default=2, help="steps of eval-heavy")
    parser.add_argument(
        "--eval-batches", type=int, default=200, help="eval-heavy's evaluation micro-batches"
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    record.add_argument(parser)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    with record.recording(
        "allocator",
        "CPU training's allocator: glibc's malloc, with huge pages, and TCMalloc",
        enabled=args.record,
    ):
        presets = run_presets(args.smoke_steps, args.eval_heavy_steps, args.eval_batches)
        print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(HEADER, flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            write_tokens(work / "data", 300_000)
            results = [r for name in args.runs for r in measure(work, name, presets[name])]
        for name in args.runs:
            by_setting = {r["setting"]: r for r in results if r["run"] == name}
            for setting in SETTINGS[1:]:
                print(f"{name}: {ratios(by_setting[setting], by_setting['glibc'], setting)}")
        print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
