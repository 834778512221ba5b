"""`repro export`: a trained run as a folder others can load (repro.export); repro.cli adds it."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_export(args) -> None:
    from repro.export import export

    out = export(args.run_dir, args.out)
    print(
        f"{out}: the model of {args.run_dir} (GPT.from_pretrained({str(out)!r}) loads it; "
        f"`hf upload USER/NAME {out} .` publishes it)"
    )


def add_commands(sub) -> None:
    """Add `export` to the `repro` parser's subparsers."""
    p: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="a run's checkpoint as safetensors weights, config.json and a model card",
    )
    p.add_argument("run_dir", type=Path, help="a run directory (results/runs/<preset>/<name>)")
    p.add_argument("--out", type=Path, required=True, help="the folder to write")
    p.set_defaults(func=cmd_export)
