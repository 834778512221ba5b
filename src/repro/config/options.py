"""The command-line options that choose a configuration and how it runs (preset, experiment, config
dir, seed, device, the speed levers), which the core's commands and the annex's share, each
defined once, and the checks on their values."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from repro import config
from repro.errors import ReproError


def add_config_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config-dir",
        type=Path,
        default=None,
        help="where presets/ and experiments.yaml are (default: $REPRO_CONFIG_DIR, else "
        "./config if it exists, else the installed checkout's config/)",
    )


def add_experiments_file(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--experiments-file",
        type=Path,
        default=None,
        help="experiments YAML (default: <config dir>/experiments.yaml)",
    )


def add_config(p: argparse.ArgumentParser, experiment: bool = True) -> None:
    """--preset (required), --experiment and --experiments-file (where experiment), --config-dir."""
    p.add_argument(
        "--preset",
        required=True,
        help="preset name (<config dir>/presets/NAME.yaml) or a YAML path",
    )
    if experiment:
        p.add_argument("--experiment", help="experiment name from the experiments file")
        add_experiments_file(p)
    add_config_dir(p)


def add_seed(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="K",
        help="seed K: indices drawn with the preset's index_seed + K, the model "
        "initialised with init_seed + K (default 0: the paper's 42 and 1337)",
    )


def add_device(p: argparse.ArgumentParser, default: str | None = "auto") -> None:
    p.add_argument(
        "--device",
        default=default,
        help="cpu, cuda, cuda:N or auto"
        + (" (default)" if default == "auto" else " (default: the preset's, auto)"),
    )


def add_checkpoint(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="ours (ckpt.pt of a run directory) or the authors' (ckpt.pt, ckpt_<step>.pt)",
    )


def add_speed(p: argparse.ArgumentParser) -> None:
    """The runtime settings that change speed, not the run (runtime_overrides reads them)."""
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
    p.add_argument(
        "--compile-mode",
        choices=["default", "max-autotune-no-cudagraphs", "reduce-overhead"],
        default=None,
        help="torch.compile's mode (default: the preset's runtime.compile_mode, default)",
    )
    p.add_argument(
        "--attention",
        choices=["auto", "flash", "efficient", "cudnn", "math"],
        default=None,
        help="the attention's SDPA backend (default: the preset's runtime.attention, auto)",
    )
    p.add_argument(
        "--fused-loss",
        nargs="?",
        const="repro",
        choices=["repro", "liger"],
        default=None,
        help="the LM head and loss with their gradients in one pass, the head not recomputed, by "
        "this kernel: repro (alone: the package's own) or liger (liger-kernel's, on a GPU) "
        "(default: the preset's runtime.fused_loss, off)",
    )
    p.add_argument(
        "--no-fused-loss",
        dest="fused_loss",
        action="store_const",
        const=False,
        help="the LM head and loss as autograd computes them",
    )


def runtime_overrides(args) -> dict:
    return {
        "compile": args.compile,
        "fused_projection": args.fused,
        "loss_chunks": args.loss_chunks,
        "compile_mode": args.compile_mode,
        "attention": args.attention,
        "fused_loss": args.fused_loss,
    }


def check_positive(args, *names: str) -> None:
    """Refuse a count or rate not positive and finite (argparse takes 0, -1, nan and inf)."""
    for name in names:
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ReproError(f"--{name.replace('_', '-')}: {value} is not a positive number")


def experiments(args) -> config.Experiments:
    return config.load_experiments(args.experiments_file, args.config_dir)
