"""The command line of training: `repro indices` draws a preset's fixed batch indices and
`repro train` trains one configuration on them (resuming from its checkpoint)."""

from __future__ import annotations

import argparse
from pathlib import Path

from repro import config
from repro.config import options
from repro.errors import ReproError
from repro.files import make_dir
from repro.runtime import signals


def cmd_indices(args) -> None:
    from repro.data import indices

    preset = config.load_preset(args.preset, args.config_dir).with_seed(args.seed)
    sidecar = indices.write_indices(preset, args.data, args.out, args.train_rows)
    print(
        f"{args.out}: {sidecar['train_rows']} x {sidecar['sequences_per_step']} train starts, "
        f"2 x {sidecar['eval_rows']} x {sidecar['eval_sequences']} eval starts"
    )


def cmd_train(args) -> None:
    if args.experiment is None:
        raise ReproError("train: --experiment is required")
    options.check_positive(args, "loss_chunks")
    if args.publish:  # a folder that cannot be written is refused now, not after the run
        make_dir(args.publish)
    print(f"config: {config.config_dir(args.config_dir).resolve()}", flush=True)
    run = config.load_run(
        args.preset,
        args.experiment,
        args.experiments_file,
        args.config_dir,
        seed=args.seed,
        **options.runtime_overrides(args),
        device=args.device,
        train_micro_batch=args.train_micro_batch,
    )
    # torch and the model only now: a configuration refused above is refused in a blink
    from repro import rundir
    from repro.runtime import distributed
    from repro.training import run as train

    with signals.stop_signals(args.stop_signal or signals.STOP_SIGNALS):
        record = train.train(run, args.data, args.indices, args.out)
    if args.publish and distributed.first_process():
        rundir.publish(args.out, args.publish)
    why = f" ({record.diverged_reason})" if record.diverged_reason else ""
    print(f"{args.out}: {record.status} at step {record.last_step}{why}")


def _indices_parser(p: argparse.ArgumentParser) -> None:
    options.add_config(p, experiment=False)
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="token files dir (train.bin, val.bin, manifest.json)",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="where the index files and indices.json go"
    )
    options.add_seed(p)
    p.add_argument(
        "--train-rows",
        type=int,
        default=None,
        metavar="R",
        help="train rows, one per optimiser step (default: the preset's max_step + 1; "
        "an experiment with a longer schedule needs its own max_step + 1)",
    )
    p.set_defaults(func=cmd_indices)


def _train_parser(p: argparse.ArgumentParser) -> None:
    options.add_config(p)
    p.add_argument("--data", type=Path, required=True, help="token files dir")
    p.add_argument("--indices", type=Path, required=True, help="indices dir from `repro indices`")
    p.add_argument("--out", type=Path, required=True, help="the run's directory")
    options.add_seed(p)
    options.add_device(p, default=None)
    options.add_speed(p)
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
        help=f"on it, checkpoint at the step's end and exit {signals.REQUEUE_EXIT} "
        f"(rerun resumes); repeatable; default {' '.join(signals.STOP_SIGNALS)}; SIGTERM "
        f"always stops the same way, and Ctrl-C (SIGINT) with exit {signals.INTERRUPT_EXIT}",
    )
    p.add_argument(
        "--publish",
        type=Path,
        default=None,
        metavar="DIR",
        help="when the run has ended, copy its metrics.csv and run.json into DIR (created "
        "at the start)",
    )
    p.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="stop (with a checkpoint) when the parent process dies (Linux; the "
        "workflow's train rule)",
    )
    p.set_defaults(func=cmd_train, restarts_allocator=True)


def add_commands(sub) -> None:
    _indices_parser(
        sub.add_parser(
            "indices", help="draw the fixed batch indices (docs/specification.md §6) for a preset"
        )
    )
    _train_parser(
        sub.add_parser("train", help="train one configuration (resumes from its checkpoint)")
    )
