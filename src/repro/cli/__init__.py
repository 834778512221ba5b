"""The `repro` command line: a thin layer over the library; every subcommand calls one function.

Run as `repro ...` or `python -m repro ...`. Any ReproError (bad configuration, data, indices,
checkpoint or run directory) is printed as one line, `repro: error: ...`, with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import repro
from repro import config
from repro.cli import authors as cli_authors
from repro.cli import compare as cli_compare
from repro.cli import data as cli_data
from repro.cli import downstream as cli_downstream
from repro.cli import export as cli_export
from repro.errors import ReproError
from repro.files import read_json, write_json
from repro.runtime import allocator, lock, preemption

DECODE_TOKENS = 32  # `bench --inference`'s default, where the context holds twice as many


def _add_config_arguments(p: argparse.ArgumentParser, experiment: bool = True) -> None:
    p.add_argument(
        "--preset",
        required=True,
        help="preset name (<config dir>/presets/NAME.yaml) or a YAML path",
    )
    if experiment:
        p.add_argument("--experiment", help="experiment name from the experiments file")
        p.add_argument(
            "--experiments-file",
            type=Path,
            default=None,
            help="experiments YAML (default: <config dir>/experiments.yaml)",
        )
    p.add_argument(
        "--config-dir",
        type=Path,
        default=None,
        help="where presets/ and experiments.yaml are (default: $REPRO_CONFIG_DIR, else "
        "./config if it exists, else the installed checkout's config/)",
    )


def _add_seed_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="K",
        help="seed K: indices drawn with the preset's index_seed + K, the model "
        "initialised with init_seed + K (default 0: the paper's 42 and 1337)",
    )


def _add_speed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the model (default: the preset's; auto = on CUDA)",
    )
    p.add_argument(
        "--fused",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the fused K,V,W1 projection of residual_gelu (default: the preset's "
        "runtime.fused_projection, auto = on CUDA)",
    )
    p.add_argument(
        "--loss-chunks",
        type=int,
        default=None,
        help="compute the LM head and loss over this many slices of the positions "
        "(default: the preset's runtime.loss_chunks, 1)",
    )


def _check_positive(args, *names: str) -> None:
    """Refuse a count or rate that is not a positive finite number: argparse's int and float take
    0, -1, nan and inf, which end in a division by zero or a meaningless figure."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ReproError(f"--{name.replace('_', '-')}: {value} is not a positive number")


def _runtime_overrides(args) -> dict:
    """The runtime settings _add_speed_arguments overrides (None: the preset's)."""
    return {
        "compile": args.compile,
        "fused_projection": args.fused,
        "loss_chunks": args.loss_chunks,
    }


def _experiments(args) -> config.Experiments:
    return config.load_experiments(args.experiments_file, args.config_dir)


def cmd_indices(args) -> None:
    from repro.data import indices

    preset = config.load_preset(args.preset, args.config_dir).with_seed(args.seed)
    sidecar = indices.write_indices(preset, args.data, args.out, args.train_rows)
    print(
        f"{args.out}: {sidecar['train_rows']} x {sidecar['sequences_per_step']} train starts, "
        f"2 x {sidecar['eval_rows']} x {sidecar['eval_sequences']} eval starts"
    )


def cmd_train(args) -> None:
    from repro import rundir, train
    from repro.runtime import distributed

    if args.experiment is None:
        raise ReproError("train: --experiment is required")
    _check_positive(args, "loss_chunks")
    print(f"config: {config.config_dir(args.config_dir).resolve()}", flush=True)
    run = config.load_run(
        args.preset,
        args.experiment,
        args.experiments_file,
        args.config_dir,
        seed=args.seed,
        **_runtime_overrides(args),
        device=args.device,
        train_micro_batch=args.train_micro_batch,
    )
    with preemption.stop_signals(args.stop_signal or preemption.STOP_SIGNALS):
        record = train.train(run, args.data, args.indices, args.out)
    if args.publish and distributed.first_process():
        rundir.publish(args.out, args.publish)
    print(f"{args.out}: {record.status} at step {record.last_step}")


def cmd_describe(args) -> None:
    from repro.perf import cost

    if (args.experiment is None) == (args.group is None):
        raise ReproError("describe: give exactly one of --experiment and --group")
    _check_positive(args, "mfu", "peak_tflops", "tokens_per_s", "seeds")
    if args.mfu > 1:
        raise ReproError(f"--mfu: {args.mfu} is more than 1 (a fraction of the peak)")
    experiments = _experiments(args)
    preset = config.load_preset(args.preset, args.config_dir)
    chosen = experiments.group(args.group) if args.group else [experiments[args.experiment]]
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
            f"{r['flops_per_token'] / 1e9:.3f} GFLOP/token  {r['gpu_hours']:8.1f} GPU-hours"
            + (f"  ({r['tokens_per_s']:,.0f} tokens/s, {r['throughput_source']})" if report else "")
        )
    if args.group or args.seeds > 1:
        source = f"the throughputs of {args.bench}" if report else rows[0]["throughput_source"]
        hours = sum(r["gpu_hours_all_seeds"] for r in rows)
        seeds = f" x {args.seeds} seeds" if args.seeds > 1 else ""
        print(
            f"{args.group or args.experiment}: {len(rows)} run{'s' * (len(rows) > 1)}{seeds}, "
            f"{hours:.1f} GPU-hours at {source}"
        )


def cmd_bench(args) -> None:
    from repro.perf import bench
    from repro.runtime.device import resolve_device

    _check_positive(
        args, "steps", "peak_tflops", "loss_chunks", "context", "decode_tokens", "repeats"
    )
    if args.warmup < 0:
        raise ReproError(f"--warmup: {args.warmup} is not a number of steps (0 or more)")
    device = resolve_device(args.device)
    preset = config.load_preset(
        args.preset or ("paper" if device.type == "cuda" else "smoke"), args.config_dir
    )
    experiments = _experiments(args)
    chosen = (
        [experiments[e] for e in args.experiment]
        if args.experiment
        else experiments.group(args.group)
    )
    if args.inference:
        from repro.perf import inference

        if not args.experiment:
            chosen = inference.default_experiments(experiments, args.group)
        runs = [config.resolve_run(preset, e, **_runtime_overrides(args)) for e in chosen]
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
    else:
        runs = [config.resolve_run(preset, e, **_runtime_overrides(args)) for e in chosen]
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
    if args.json:
        write_json(args.json, report)


def cmd_status(args) -> None:
    from repro.analysis import status

    table = status.status_table(args.runs_dir, args.preset, args.authors_runs_dir)
    print(status.format_status(table))


def cmd_generate(args) -> None:
    from repro.generate import generate_text

    result = generate_text(
        args.checkpoint,
        args.prompt,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
        device=args.device,
    )
    print(json.dumps(result, indent=2) if args.json else result["prompt"] + result["text"])


def _generate_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="ours (ckpt.pt of a run directory) or the authors' (ckpt.pt, ckpt_<step>.pt)",
    )
    p.add_argument(
        "--prompt", default="", help="the text to continue (default: none, <|endoftext|>)"
    )
    p.add_argument("--max-new-tokens", type=int, default=100, help="tokens to sample (default 100)")
    p.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="softmax temperature (default 1; 0: always the most likely token)",
    )
    p.add_argument(
        "--top-k",
        type=int,
        default=None,
        help="sample among the K most likely tokens only (default: all)",
    )
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument(
        "--json", action="store_true", help="print JSON: the text, its tokens, the settings"
    )
    p.set_defaults(func=cmd_generate)


def _train_parser(p: argparse.ArgumentParser) -> None:
    _add_config_arguments(p)
    p.add_argument("--data", type=Path, required=True, help="token files dir")
    p.add_argument("--indices", type=Path, required=True, help="indices dir from `repro indices`")
    p.add_argument("--out", type=Path, required=True, help="the run's directory")
    _add_seed_argument(p)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: the preset's, auto)")
    _add_speed_arguments(p)
    p.add_argument(
        "--train-micro-batch",
        type=int,
        default=None,
        help="sequences per training forward pass on this machine "
        "(default: the preset's); "
        "must divide the batch; changes speed, not the run",
    )
    p.add_argument(
        "--stop-signal",
        action="append",
        metavar="SIG",
        help=f"on it, checkpoint at the step's end and exit {preemption.REQUEUE_EXIT} "
        f"(rerun resumes); repeatable; default {' '.join(preemption.STOP_SIGNALS)}",
    )
    p.add_argument(
        "--publish",
        type=Path,
        default=None,
        metavar="DIR",
        help="when the run has ended, copy its metrics.csv and run.json into DIR",
    )
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop (with a checkpoint) when the parent process dies (Linux; the "
        "workflow's train rule)",
    )
    p.set_defaults(func=cmd_train, tcmalloc=True)


def _bench_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", default=None, help="default: paper on CUDA, smoke on CPU")
    p.add_argument("--group", default="table1", help="experiments to time (default: table1)")
    p.add_argument(
        "--experiment", action="append", help="time this experiment instead (repeatable)"
    )
    p.add_argument(
        "--experiments-file",
        type=Path,
        default=None,
        help="experiments YAML (default: <config dir>/experiments.yaml)",
    )
    p.add_argument(
        "--config-dir", type=Path, default=None, help="where presets/ and experiments.yaml are"
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    _add_speed_arguments(p)
    p.add_argument(
        "--train-micro-batch",
        type=int,
        nargs="+",
        default=None,
        help="micro-batch sizes to try, each dividing the batch "
        "(default: the preset's); "
        "the fastest of each experiment is its result",
    )
    p.add_argument("--steps", type=int, default=10, help="optimiser steps timed (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="steps run first, untimed (default 3)")
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's dense bf16 peak (default: from the known-GPU table)",
    )
    p.add_argument(
        "--breakdown", action="store_true", help="profile one step: time by kernel category"
    )
    p.add_argument(
        "--json", type=Path, default=None, help="also write the report here (for describe --bench)"
    )
    p.add_argument(
        "--inference",
        action="store_true",
        help="time inference instead: prefill tokens/s and cached decode ms/token of "
        "each query mode (default: one experiment per mode of --group, identity)",
    )
    p.add_argument(
        "--context",
        type=int,
        default=None,
        help="with --inference: prefill tokens (default: the preset's block size)",
    )
    p.add_argument(
        "--decode-tokens",
        type=int,
        default=None,
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


def _describe_parser(p: argparse.ArgumentParser) -> None:
    _add_config_arguments(p)
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
        default=None,
        help="the GPU's dense bf16 peak (default: H100/H200 SXM's, 989)",
    )
    p.add_argument(
        "--tokens-per-s",
        type=float,
        default=None,
        help="measured throughput (e.g. from `repro bench`); overrides --mfu",
    )
    p.add_argument(
        "--bench",
        type=Path,
        default=None,
        help="a `repro bench --json` report: each experiment's measured throughput",
    )
    p.set_defaults(func=cmd_describe)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {repro.__version__}",
        help="print the package version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cli_data.add_commands(sub)
    p = sub.add_parser(
        "indices", help="draw the fixed batch indices (docs/specification.md §6) for a preset"
    )
    _add_config_arguments(p, experiment=False)
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="token files dir (train.bin, val.bin, manifest.json)",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="where the index files and indices.json go"
    )
    _add_seed_argument(p)
    p.add_argument(
        "--train-rows",
        type=int,
        default=None,
        metavar="R",
        help="train rows, one per optimiser step (default: the preset's max_step + 1; "
        "an experiment with a longer schedule needs its own max_step + 1)",
    )
    p.set_defaults(func=cmd_indices)
    _train_parser(
        sub.add_parser("train", help="train one configuration (resumes from its checkpoint)")
    )
    _bench_parser(
        sub.add_parser(
            "bench",
            help="time training steps of each experiment on this device: ms/step, tokens/s, MFU",
        )
    )
    _describe_parser(
        sub.add_parser("describe", help="parameters, FLOPs and GPU-hours of a run or a group")
    )
    p = sub.add_parser(
        "status",
        help="each run of a preset: status, step, last validation "
        "loss, tokens/s, ETA, the trainer holding it",
    )
    p.add_argument("--preset", help="the preset whose runs to list (default: every preset)")
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=Path("results/runs"),
        help="where the runs are, one folder per preset (default: results/runs)",
    )
    p.add_argument(
        "--authors-runs-dir",
        type=Path,
        default=Path("results/authors/runs"),
        help="the authors' imported runs, one folder per preset: the `vs authors` column "
        "compares each run with theirs (default: results/authors/runs)",
    )
    p.set_defaults(func=cmd_status)
    _generate_parser(
        sub.add_parser(
            "generate",
            help="sample text from a checkpoint (ours or the authors') with the key/value cache",
        )
    )
    cli_authors.add_commands(sub, _add_config_arguments)
    cli_export.add_commands(sub)
    cli_compare.add_commands(sub)
    cli_downstream.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parent = os.getppid()  # first: the process that started this one, before anything slow
    args = build_parser().parse_args(argv)
    if argv is None and getattr(args, "tcmalloc", False):
        # The command as it was started, again under TCMalloc (repro.runtime.allocator): before
        # torch is imported, so that the restart costs only Python's start.
        allocator.restart_under_tcmalloc()
    if getattr(args, "exit_with_parent", False):
        # Armed before torch is imported (seconds): a parent killed meanwhile is caught too.
        lock.exit_with_parent(parent)
    try:
        args.func(args)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2
    except preemption.Preempted as e:
        print(f"repro: {e}", file=sys.stderr)
        return preemption.REQUEUE_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
