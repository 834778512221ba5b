"""The `repro` command. This branch wires only `prepare`; the other subcommands live on main."""

from __future__ import annotations

import argparse
import sys

from repro.data import DataError, add_prepare_arguments, prepare_command
from repro.tokenizer import TokenizerError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="repro", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser("prepare", help="tokenize a corpus into train.bin / val.bin")
    add_prepare_arguments(prepare)
    prepare.set_defaults(run=prepare_command)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (DataError, TokenizerError) as e:
        print(f"repro: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
