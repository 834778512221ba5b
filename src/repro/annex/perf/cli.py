"""The command line of cost and speed: `repro describe` and `repro bench`."""

from __future__ import annotations

import json
from pathlib import Path

from repro import config
from repro.config import options
from repro.errors import ReproError
from repro.files import read_json, write_json

DECODE_TOKENS = 32  # `bench --inference`'s default, where the context holds twice as many


def cmd_describe(args) -> None:
    options.check_positive(args, "mfu", "peak_tflops", "tokens_per_s", "seeds")
    if args.mfu > 1:
        raise ReproError(f"--mfu: {args.mfu} is more than 1 (a fraction of the peak)")
    experiments = options.experiments(args)
    if (args.experiment is None) == (args.group is None):
        raise ReproError(
            "describe: give exactly one of --experiment NAME and --group NAME "
            f"(groups: {', '.join(sorted(experiments.groups))}; e.g. --group table1)"
        )
    preset = config.load_preset(args.preset, args.config_dir)
    chosen = experiments.group(args.group) if args.group else [experiments[args.experiment]]
    from repro.annex.perf import cost  # torch, to count the parameters: after the checks above

    report = read_json(args.bench, hint="a `repro bench --json` report") if args.bench else None
    if report is not None:
        cost.check_bench_report(report, args.bench)
    peak = args.peak_tflops * 1e12 if args.peak_tflops else cost.H100_BF16_PEAK_FLOPS
    rows = [
        cost.describe(
            config.resolve_run(preset, e),
            mfu=args.mfu,
            peak_flops=peak,
            tokens_per_s=args.tokens_per_s,
            bench=report,
            seeds=args.seeds,
        )
        for e in chosen
    ]
    if args.json:
        print(json.dumps(rows[0] if args.experiment else rows, indent=2))
        return
    for r in rows:
        print(
            f"{r['experiment']:<26} non-embedding {r['non_embedding_params']:>12,}  "
            f"total {r['total_params']:>12,}  {r['tokens_per_step']:,} tokens/step  "
            f"{r['flops_per_token'] / 1e9:.3f} GFLOP/token  {gpu_time(r['gpu_hours']):>17}"
            + (f"  (gate {r['gate_params']:,})" if r["gate_params"] else "")
            + (f"  ({r['tokens_per_s']:,.0f} tokens/s, {r['throughput_source']})" if report else "")
        )
    if args.group or args.seeds > 1:
        source = f"the throughputs of {args.bench}" if report else rows[0]["throughput_source"]
        hours = sum(r["gpu_hours_all_seeds"] for r in rows)
        seeds = f" x {args.seeds} seeds" if args.seeds > 1 else ""
        print(
            f"{args.group or args.experiment}: {len(rows)} run{'s' * (len(rows) > 1)}{seeds}, "
            f"{gpu_time(hours)} at {source}"
        )


def gpu_time(hours: float) -> str:
    """GPU-hours to one decimal, or "under 0.1": a CPU preset's runs round to 0.0, which reads
    as no cost at all (and at that size overheads, not FLOPs, set the time: `repro bench`)."""
    return f"{hours:.1f} GPU-hours" if hours >= 0.05 else "under 0.1 GPU-hours"


def cmd_bench(args) -> None:
    from repro.runtime.device import resolve_device

    options.check_positive(
        args, "steps", "peak_tflops", "loss_chunks", "context", "decode_tokens", "repeats"
    )
    if args.warmup < 0:
        raise ReproError(f"--warmup: {args.warmup} is not a number of steps (0 or more)")
    device = resolve_device(args.device)
    preset = config.load_preset(
        args.preset or ("paper" if device.type == "cuda" else "smoke"), args.config_dir
    )
    experiments = options.experiments(args)
    chosen = (
        [experiments[e] for e in args.experiment]
        if args.experiment
        else experiments.group(args.group)
    )
    if args.inference:
        report = _bench_inference(args, preset, experiments, chosen, device)
    else:
        report = _bench_training(args, preset, experiments, chosen, device)
    if args.json:
        write_json(args.json, report)


def _bench_training(args, preset, experiments, chosen, device) -> dict:
    from repro.annex.perf import bench

    runs = [config.resolve_run(preset, e, **options.runtime_overrides(args)) for e in chosen]
    report = bench.bench(
        runs,
        device,
        experiments.baseline,
        micro_batches=args.train_micro_batch,
        steps=args.steps,
        warmup=args.warmup,
        peak=args.peak_tflops and args.peak_tflops * 1e12,
        breakdown=args.breakdown,
    )
    print(bench.format_report(report))
    return report


def _bench_inference(args, preset, experiments, chosen, device) -> dict:
    from repro.annex.perf import inference

    if not args.experiment:
        chosen = inference.default_experiments(experiments, args.group)
    runs = [config.resolve_run(preset, e, **options.runtime_overrides(args)) for e in chosen]
    context = args.context or preset.model.block_size
    report = inference.inference_bench(
        runs,
        device,
        experiments.baseline,
        context=context,
        decode_tokens=args.decode_tokens or min(DECODE_TOKENS, context // 2),
        repeats=args.repeats,
    )
    print(inference.format_report(report))
    return report


def _describe_parser(sub) -> None:
    p = sub.add_parser("describe", help="parameters, FLOPs and GPU-hours of a run or a group")
    options.add_config(p)
    p.add_argument("--group", help="a group of the experiments file (table1, figure2, ...)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="the GPU-hours of N seeds of each run (default 1)",
    )
    p.add_argument(
        "--mfu", type=float, default=0.4, help="model FLOPs utilisation assumed (default 0.4)"
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        help="the GPU's dense bf16 peak (default: H100/H200 SXM's, 989)",
    )
    p.add_argument(
        "--tokens-per-s",
        type=float,
        help="measured throughput (e.g. from `repro bench`); overrides --mfu",
    )
    p.add_argument(
        "--bench",
        type=Path,
        help="a `repro bench --json` report: each experiment's measured throughput",
    )
    p.set_defaults(func=cmd_describe)


def _bench_parser(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="time training steps of each experiment on this device: ms/step, tokens/s, MFU",
    )
    p.add_argument("--preset", help="default: paper on CUDA, smoke on CPU")
    p.add_argument("--group", default="table1", help="experiments to time (default: table1)")
    p.add_argument(
        "--experiment", action="append", help="time this experiment instead (repeatable)"
    )
    options.add_experiments_file(p)
    options.add_config_dir(p)
    options.add_device(p)
    options.add_speed(p)
    p.add_argument(
        "--train-micro-batch",
        type=int,
        nargs="+",
        help="micro-batch sizes to try, each dividing the batch "
        "(default: the preset's); "
        "the fastest of each experiment is its result",
    )
    p.add_argument("--steps", type=int, default=10, help="optimiser steps timed (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="steps run first, untimed (default 3)")
    p.add_argument(
        "--peak-tflops",
        type=float,
        help="the device's dense bf16 peak (default: from the known-GPU table)",
    )
    p.add_argument(
        "--breakdown", action="store_true", help="profile one step: time by kernel category"
    )
    p.add_argument("--json", type=Path, help="also write the report here (for describe --bench)")
    p.add_argument(
        "--inference",
        action="store_true",
        help="time inference instead: prefill tokens/s and cached decode ms/token of "
        "each query mode (default: one experiment per mode of --group, identity)",
    )
    p.add_argument(
        "--context",
        type=int,
        help="with --inference: prefill tokens (default: the preset's block size)",
    )
    p.add_argument(
        "--decode-tokens",
        type=int,
        help=f"with --inference: tokens decoded one at a time, ending at the context "
        f"(default {DECODE_TOKENS}, or half the context where that is fewer)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="with --inference: timed rounds, interleaved over the models, after one "
        "warm-up round (default 3)",
    )
    p.set_defaults(func=cmd_bench)


def add_commands(sub) -> None:
    for add in (_bench_parser, _describe_parser):
        add(sub)
