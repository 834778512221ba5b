"""The figures of a GPU window as a page: window.json (and levers.json, where the levers stage ran)
of a folder that validate.sh wrote, rendered into Markdown with the date, the machine, the command
and the load they were measured under, beside the targets of docs/performance.md.

    python benchmarks/gpu/summary.py benchmarks/results/gpu-nvidia-h200

writes benchmarks/results/ its page, named after the folder it sits beside (gpu-nvidia-h200.md).

Every figure is read from the JSON; none is typed here. A record written before the stages kept
their start (`started`, `load`) takes them from --date and --load.
"""

import argparse
import json
from pathlib import Path

from repro.files import atomic_write

MFU_TARGET, MFU_FLOOR = 0.50, 0.45  # docs/performance.md, "The targets"
RATIO_TARGET, RATIO_FLOOR = 1.03, 1.05
RESULTS = Path(__file__).resolve().parents[1] / "results"


def shown(value, fmt: str) -> str:
    """A figure in `fmt`, or "-" where the device gives none (a CPU: no MFU, no peak memory)."""
    return "-" if value is None else format(value, fmt)


def gib(n: int | None) -> float | None:
    return None if n is None else n / 2**30


def verdict(value: float | None, target: float, floor: float, higher_is_better: bool) -> str:
    if value is None:
        return "not measured on this device"
    sign = 1 if higher_is_better else -1
    if sign * (value - target) >= 0:
        return "meets the target"
    return "within the floor" if sign * (value - floor) >= 0 else "misses the floor"


def row(fastest: dict) -> str:
    return (
        f"| {fastest['experiment']} | {fastest['train_micro_batch']} | "
        f"{fastest['step_s'] * 1000:.1f} | {fastest['tokens_per_s']:,.0f} | "
        f"{shown(fastest['mfu'], '.1%')} | {shown(gib(fastest['peak_memory_bytes']), '.1f')} |"
    )


def gpu_details(env: dict) -> str:
    if env.get("capability") is None:
        return ""
    return f" (compute capability {env['capability']}, driver {env['driver']})"


def load_average(load) -> str:
    """os.getloadavg()'s three figures as the stage recorded them, or a record's own words."""
    if isinstance(load, list):
        return ", ".join(f"{x:.2f}" for x in load) + " over 1, 5 and 15 minutes"
    return str(load)


def device(window: dict) -> str:
    return window["steps"]["environment"].get("gpu") or window["device"]


def window_lines(window: dict) -> list[str]:
    steps = window["steps"]
    env, train = steps["environment"], steps["train"]
    base = steps["pair_baseline"]["fastest"][0]
    ratio = steps["pair"]["step_time_ratios"]
    resume = steps["resume"]
    lines = [
        f"Device {device(window)}{gpu_details(env)}, torch {env['torch']}, CUDA {env['cuda']}, "
        f"cuDNN {env['cudnn']}, triton {env['triton']}, "
        f"Python {env['python']}; attention kernel {window['attention_kernel']}, compile mode "
        f"{window['compile_mode']}; the stage took {window['seconds']} s of its "
        f"{window['budget_s']} s budget.",
        "",
        f"Command: `{window['command']}`",
        "",
        "| experiment | micro-batch | ms/step | tokens/s | MFU | peak GiB |",
        "|---|---|---|---|---|---|",
        row(base),
        *(row(r) for r in steps["pair_resgelu-lr3e-3"]["fastest"]),
        "",
        f"- Baseline MFU {shown(base['mfu'], '.1%')}: "
        f"{verdict(base['mfu'], MFU_TARGET, MFU_FLOOR, True)} "
        f"(target {MFU_TARGET:.0%}, floor {MFU_FLOOR:.0%}).",
    ]
    for name, value in ratio.items():
        judged = verdict(value, RATIO_TARGET, RATIO_FLOOR, False)
        lines.append(
            f"- {name} step time over the baseline's {value:.3f}: {judged} "
            f"(target {RATIO_TARGET}, floor {RATIO_FLOOR})."
        )
    lines += [
        f"- `repro train` of resgelu-lr3e-3, 21 steps: training graph compiled in "
        f"{train['compile_time_s']:.1f} s, evaluation graph in "
        f"{train['eval_compile_time_s']:.1f} s; "
        f"{train['tokens_per_s']:,.0f} tokens/s, MFU {shown(train.get('mfu'), '.1%')}; loss "
        f"{train['first_loss']:.3f} -> {train['last_loss']:.3f}.",
        f"- Stopped by SIGTERM (exit {steps['stopped']['exit']}) and resumed: largest relative "
        f"difference from the uninterrupted run {resume['largest_relative_difference']:.2e} "
        f"(tolerance {resume['tolerance']}): {resume['status']}.",
    ]
    if steps.get("probe", {}).get("status") == "ok":
        probe = steps["probe"]["fastest"][0]
        lines.append(
            f"- `runtime.train_micro_batch: auto` chose {probe['train_micro_batch']} "
            f"(peak {shown(gib(probe['peak_memory_bytes']), '.1f')} GiB); one step there, "
            f"timed without warm-up (not comparable with the table): "
            f"{probe['step_s'] * 1000:.1f} ms."
        )
    return lines


def levers_lines(levers: dict) -> list[str]:
    lines = ["", "### Levers (step time over the defaults', same micro-batch)", ""]
    lines += [
        f"Command: `{levers['command']}`",
        "",
        "| lever | status | baseline | resgelu-lr3e-3 |",
    ]
    lines.append("|---|---|---|---|")
    for name, step in levers["steps"].items():
        if name in ("environment", "default"):
            continue
        over = step.get("over_default", {})
        cells = [f"{over[e]:.3f}" if e in over else "-" for e in ("baseline", "resgelu-lr3e-3")]
        status = step["status"] + (f" ({step['seconds']} s)" if "seconds" in step else "")
        lines.append(f"| {name} | {status} | {' | '.join(cells)} |")
    return lines


def page(folder: Path, date: str | None, load: str | None) -> str:
    window = json.loads((folder / "window.json").read_text())
    started = window.get("started", date)
    measured_load = load_average(window.get("load", load))
    command = f"benchmarks/gpu/summary.py {folder.as_posix()}"
    if "started" not in window:  # a record older than the stages' own date and load
        command += f" --date {date} --load '{load}'"
    lines = [
        f"# GPU window: {device(window)}",
        "",
        f"Measured {started} (load {measured_load}); raw files in "
        f"`{folder.as_posix()}/`. Written by `{command}`.",
        "",
        "## Window",
        "",
        *window_lines(window),
    ]
    if (folder / "levers.json").exists():
        lines += levers_lines(json.loads((folder / "levers.json").read_text()))
        lines += [
            "",
            "Each paper run's GPU-hours at these throughputs: `repro describe --preset paper "
            f"--group table1 --bench {folder.as_posix()}/levers-default.json`.",
        ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="where validate.sh wrote window.json")
    parser.add_argument("--date", help="when, for a record that does not say")
    parser.add_argument("--load", help="the load average, for a record that does not say")
    parser.add_argument("--out", type=Path, default=RESULTS, help="default benchmarks/results")
    args = parser.parse_args(argv)
    target = args.out / f"{args.folder.resolve().name}.md"
    with atomic_write(target) as f:  # a new file renamed over the page: never through a link
        f.write(page(args.folder, args.date, args.load))
    print(target)


if __name__ == "__main__":
    main()
