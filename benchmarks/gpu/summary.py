"""The figures of a GPU window as a page: window.json (and levers.json, where the levers stage ran)
of a folder that validate.sh wrote, rendered into Markdown with the date, the machine, the command
and the load they were measured under, beside the targets of docs/performance.md.

    python benchmarks/gpu/summary.py results/bench/nvidia-h200

writes benchmarks/results/ its page, named after the folder (gpu-nvidia-h200.md).

Every figure is read from the JSON; none is typed here. A record written before the stages kept
their start (`started`, `load`) takes them from --date and --load.
"""

import argparse
import json
from pathlib import Path

MFU_TARGET, MFU_FLOOR = 0.50, 0.45  # docs/performance.md, "The targets"
RATIO_TARGET, RATIO_FLOOR = 1.03, 1.05
RESULTS = Path(__file__).resolve().parents[1] / "results"


def verdict(value: float, target: float, floor: float, higher_is_better: bool) -> str:
    sign = 1 if higher_is_better else -1
    if sign * (value - target) >= 0:
        return "meets the target"
    return "within the floor" if sign * (value - floor) >= 0 else "misses the floor"


def row(fastest: dict) -> str:
    return (
        f"| {fastest['experiment']} | {fastest['train_micro_batch']} | "
        f"{fastest['step_s'] * 1000:.1f} | {fastest['tokens_per_s']:,.0f} | "
        f"{fastest['mfu']:.1%} | {fastest['peak_memory_bytes'] / 2**30:.1f} |"
    )


def window_lines(window: dict) -> list[str]:
    steps = window["steps"]
    env, train = steps["environment"], steps["train"]
    base = steps["pair_baseline"]["fastest"][0]
    ratio = steps["pair"]["step_time_ratios"]
    resume = steps["resume"]
    lines = [
        f"Device {env['gpu']} (compute capability {env['capability']}, driver {env['driver']}), "
        f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, triton {env['triton']}, "
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
        f"- Baseline MFU {base['mfu']:.1%}: {verdict(base['mfu'], MFU_TARGET, MFU_FLOOR, True)} "
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
        f"{train['tokens_per_s']:,.0f} tokens/s, MFU {train['mfu']:.1%}; loss "
        f"{train['first_loss']:.3f} -> {train['last_loss']:.3f}.",
        f"- Stopped by SIGTERM (exit {steps['stopped']['exit']}) and resumed: largest relative "
        f"difference from the uninterrupted run {resume['largest_relative_difference']:.2e} "
        f"(tolerance {resume['tolerance']}): {resume['status']}.",
    ]
    if steps.get("probe", {}).get("status") == "ok":
        probe = steps["probe"]["fastest"][0]
        lines.append(
            f"- `runtime.train_micro_batch: auto` chose {probe['train_micro_batch']} "
            f"(peak {probe['peak_memory_bytes'] / 2**30:.1f} GiB); one step there, timed without "
            f"warm-up (not comparable with the table): {probe['step_s'] * 1000:.1f} ms."
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
    measured_load = window.get("load", load)
    lines = [
        f"# GPU window: {window['steps']['environment']['gpu']}",
        "",
        f"Measured {started} on a node to itself (load {measured_load}); raw files in "
        f"`{folder.as_posix()}/`. Written by `benchmarks/gpu/summary.py {folder.as_posix()}`.",
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
    target = args.out / f"gpu-{args.folder.resolve().name}.md"
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)  # a stale one, or a link: never written through
    partial.write_text(page(args.folder, args.date, args.load))
    partial.replace(target)
    print(target)


if __name__ == "__main__":
    main()
