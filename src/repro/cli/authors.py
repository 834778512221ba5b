"""The command line of the authors' artefacts (docs/specification.md §8): `repro evaluate` and
`repro import-authors-run`; repro.cli adds them to its subcommands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from repro import config


def cmd_evaluate(args) -> None:
    from repro import evaluate

    preset = config.load_preset(args.preset, args.config_dir)
    result = evaluate.evaluate(
        args.checkpoint, preset, args.data, args.indices, step=args.step, device=args.device
    )
    print(json.dumps(result, indent=2) if args.json else evaluate.format_result(result))


def cmd_import_authors_run(args) -> None:
    from repro.authors import runs as authors

    preset, experiments = config.load_config(args.preset, args.config_dir)
    record = authors.import_authors_run(args.folder, args.out, preset, experiments, args.experiment)
    print(
        f"{args.out}: the authors' {record.data['authors_config']} as {record.experiment} "
        f"({record.status}, last step {record.last_step})"
    )


def _evaluate_parser(p: argparse.ArgumentParser, add_config_arguments) -> None:
    add_config_arguments(p, experiment=False)
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="ours (ckpt.pt of a run directory) or the authors' (ckpt.pt, ckpt_<step>.pt)",
    )
    p.add_argument("--data", type=Path, required=True, help="token files dir")
    p.add_argument("--indices", type=Path, required=True, help="indices dir from `repro indices`")
    p.add_argument(
        "--step",
        type=int,
        default=None,
        help="whose evaluation sequences (default: the checkpoint's last evaluation step: its "
        "own step when training evaluates there, else the evaluation step before it)",
    )
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a line")
    p.set_defaults(func=cmd_evaluate)


def _import_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path, help="one of the authors' out_config_* folders")
    p.add_argument("--out", type=Path, required=True, help="the run directory to write")
    p.add_argument("--preset", default="paper", help="the scale they ran at (default: paper)")
    p.add_argument("--experiment", help="default: the one whose `source` names the folder")
    p.add_argument(
        "--config-dir", type=Path, default=None, help="where presets/ and experiments.yaml are"
    )
    p.set_defaults(func=cmd_import_authors_run)


def add_commands(sub, add_config_arguments) -> None:
    """Add the two subcommands to the `repro` parser's subparsers (with its config arguments)."""
    _evaluate_parser(
        sub.add_parser(
            "evaluate",
            help="evaluation losses of a checkpoint (ours or the authors') as training "
            "computes them",
        ),
        add_config_arguments,
    )
    _import_parser(
        sub.add_parser(
            "import-authors-run",
            help="the authors' loss tensors -> a run directory (never trained)",
        )
    )
