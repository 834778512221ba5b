"""The command line of trained models: `repro generate` and `repro export`."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

from repro.config import options
from repro.errors import ReproError


def cmd_generate(args) -> None:
    from repro.annex.models.generate import generate_text

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


def cmd_export(args) -> None:
    from repro.annex.models.export import export, export_load_call

    if importlib.util.find_spec("transformers") is None:
        raise ReproError("repro export needs transformers: pip install -e '.[hf]'")
    out = export(args.run_dir, args.out, args.downstream)
    print(f"{out}: the model of {args.run_dir} as a transformers model; its card says more.")
    print(f"load it: {export_load_call(out)}")
    print(f"publish it: hf upload USER/NAME {shlex.quote(str(out))} .")


def _generate_parser(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="sample text from a checkpoint (ours or the authors') with the key/value cache",
    )
    options.add_checkpoint(p)
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
        "--top-k", type=int, help="sample among the K most likely tokens only (default: all)"
    )
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (default 0)")
    options.add_device(p)
    p.add_argument(
        "--json", action="store_true", help="print JSON: the text, its tokens, the settings"
    )
    p.set_defaults(func=cmd_generate)


def _export_parser(sub) -> None:
    p = sub.add_parser(
        "export",
        help="a run's checkpoint as a transformers model folder, with its tokenizer and card",
    )
    p.add_argument("run_dir", type=Path, help="a run directory (results/runs/<preset>/<name>)")
    p.add_argument("--out", type=Path, required=True, help="the folder to write")
    p.add_argument(
        "--downstream",
        type=Path,
        nargs="+",
        default=[],
        metavar="DIR",
        help="`repro downstream --out` folders of this model: the card states their scores, "
        ".eval_results/ holds them in the Hub's format",
    )
    p.set_defaults(func=cmd_export)


def add_commands(sub) -> None:
    for add in (_generate_parser, _export_parser):
        add(sub)
