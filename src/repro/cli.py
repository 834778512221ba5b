"""The `repro` command line: a thin layer over the library; every subcommand calls one function."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repro import bench, config, cost, indices, train
from repro.data import DataError, add_prepare_arguments, prepare_command
from repro.tokenizer import TokenizerError


def _add_run_arguments(p: argparse.ArgumentParser, experiment_required: bool = True) -> None:
    p.add_argument("--preset", required=True, help="preset name (config/presets/NAME.yaml) or a YAML path")
    p.add_argument("--experiment", required=experiment_required,
                   help="experiment name from the experiments file")
    p.add_argument("--experiments-file", type=Path, default=None,
                   help="experiments YAML (default: config/experiments.yaml)")


def _add_speed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                   help="torch.compile the model (default: the preset's; auto = on CUDA)")
    p.add_argument("--fused", action=argparse.BooleanOptionalAction, default=None,
                   help="the fused K,V,W1 projection of residual_gelu (default: on CUDA)")


def cmd_indices(args) -> None:
    preset = config.load_preset(args.preset)
    sidecar = indices.write_indices(preset, args.data, args.out)
    print(f"{args.out}: {sidecar['train_rows']} x {sidecar['sequences_per_step']} train starts, "
          f"2 x {sidecar['eval_rows']} x {sidecar['eval_sequences']} eval starts")


def cmd_train(args) -> None:
    run = config.load_run_config(args.preset, args.experiment, args.experiments_file)
    record = train.train(run, args.data, args.indices, args.out, device=args.device,
                         compile=args.compile, micro_batch=args.micro_batch, fused=args.fused)
    print(f"{args.out}: {record['status']} at step {record['last_step']}")


def cmd_describe(args) -> None:
    if (args.experiment is None) == (args.group is None):
        raise config.ConfigError("describe: give exactly one of --experiment and --group")
    experiments = config.load_experiments(args.experiments_file)
    preset = config.load_preset(args.preset)
    chosen = experiments.group(args.group) if args.group else [experiments[args.experiment]]
    report = _read_bench(args.bench) if args.bench else None
    rows = [cost.describe(config.RunConfig(preset, e), mfu=args.mfu, peak_flops=args.peak_tflops * 1e12,
                          tokens_per_s=args.tokens_per_s, bench=report)
            for e in chosen]
    if args.json:
        print(json.dumps(rows[0] if args.experiment else rows, indent=2))
        return
    for r in rows:
        print(f"{r['experiment']:<26} non-embedding {r['non_embedding_params']:>12,}  "
              f"total {r['total_params']:>12,}  {r['tokens_per_step']:,} tokens/step  "
              f"{r['flops_per_token'] / 1e9:.3f} GFLOP/token  {r['gpu_hours']:8.1f} GPU-hours"
              + (f"  ({r['tokens_per_s']:,.0f} tokens/s, {r['throughput_source']})" if report else ""))
    if args.group:
        source = f"the throughputs of {args.bench}" if report else rows[0]["throughput_source"]
        print(f"{args.group}: {len(rows)} runs, {sum(r['gpu_hours'] for r in rows):.1f} GPU-hours at {source}")


def _read_bench(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise config.ConfigError(f"{path}: not a `repro bench --json` report ({e})") from None


def cmd_bench(args) -> None:
    device = train.resolve_device(args.device)
    preset = args.preset or ("paper" if device.type == "cuda" else "smoke")
    experiments = config.load_experiments(args.experiments_file)
    chosen = experiments.group(args.group) if not args.experiment else [experiments[e] for e in args.experiment]
    runs = [config.RunConfig(config.load_preset(preset), e) for e in chosen]
    report = bench.bench(runs, device, micro_batches=args.micro_batch, steps=args.steps,
                         warmup=args.warmup, compile=args.compile, fused=args.fused,
                         peak=args.peak_tflops and args.peak_tflops * 1e12, breakdown=args.breakdown)
    print(bench.format_report(report))
    if args.json:
        train.write_json(args.json, report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("prepare", help="tokenize a corpus into train.bin / val.bin + manifest.json")
    add_prepare_arguments(p)
    p.set_defaults(func=prepare_command)

    p = sub.add_parser("indices", help="draw the fixed batch indices (SPEC 6) for a preset")
    p.add_argument("--preset", required=True)
    p.add_argument("--data", type=Path, required=True, help="token files dir (train.bin, val.bin, manifest.json)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_indices)

    p = sub.add_parser("train", help="train one configuration (resumes from its checkpoint)")
    _add_run_arguments(p)
    p.add_argument("--data", type=Path, required=True, help="token files dir")
    p.add_argument("--indices", type=Path, required=True, help="indices dir from `repro indices`")
    p.add_argument("--out", type=Path, required=True, help="the run's directory")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: the preset's, auto)")
    _add_speed_arguments(p)
    p.add_argument("--micro-batch", type=int, default=None,
                   help="sequences per forward pass on this machine (default: the preset's); "
                        "must divide the batch; changes speed, not the run")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("bench", help="time training steps of each experiment on this device: "
                                     "ms/step, tokens/s, MFU")
    p.add_argument("--preset", default=None, help="default: paper on CUDA, smoke on CPU")
    p.add_argument("--group", default="table1", help="experiments to time (default: table1)")
    p.add_argument("--experiment", action="append", help="time this experiment instead (repeatable)")
    p.add_argument("--experiments-file", type=Path, default=None)
    p.add_argument("--device", default="auto")
    _add_speed_arguments(p)
    p.add_argument("--micro-batch", type=int, nargs="+", default=None,
                   help="micro-batch sizes to try, each dividing the batch (default: the preset's); "
                        "the fastest of each experiment is its result")
    p.add_argument("--steps", type=int, default=10, help="optimiser steps timed (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="steps run first, untimed (default 3)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's dense bf16 peak (default: from the known-GPU table)")
    p.add_argument("--breakdown", action="store_true", help="profile one step: time by kernel category")
    p.add_argument("--json", type=Path, default=None, help="also write the report here (for describe --bench)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("describe", help="parameters, FLOPs and GPU-hours of a run or a group")
    _add_run_arguments(p, experiment_required=False)
    p.add_argument("--group", help="a group of the experiments file (table1, figure2, ...)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--mfu", type=float, default=0.4, help="model FLOPs utilisation assumed (default 0.4)")
    p.add_argument("--peak-tflops", type=float, default=cost.H100_BF16_PEAK_FLOPS / 1e12,
                   help="the GPU's dense bf16 peak (default 989, H100/H200)")
    p.add_argument("--tokens-per-s", type=float, default=None,
                   help="measured throughput (e.g. from `repro bench`); overrides --mfu")
    p.add_argument("--bench", type=Path, default=None,
                   help="a `repro bench --json` report: each experiment's measured throughput")
    p.set_defaults(func=cmd_describe)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except (config.ConfigError, DataError, TokenizerError, indices.IndicesError, train.RunError) as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
