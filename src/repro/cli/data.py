"""The command line of the token files: `repro prepare` and `repro verify`; repro.cli adds them to
its subcommands."""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.config import CORPORA
from repro.data import corpus, openwebtext, python_docs
from repro.errors import ReproError
from repro.runtime import network


def resolve_corpus(args) -> None:
    """--corpus NAME -> that corpus's source flags (openwebtext: the hub unless told otherwise)."""
    if args.corpus is None:
        if not (args.python_docs or args.hub_id or args.data_files):
            raise ReproError("give --corpus, --python-docs, --hub-id or --data-files")
        return
    if args.python_docs:
        raise ReproError("--python-docs: give it or --corpus, not both")
    if args.corpus == "python-docs":
        for flag in ("hub_id", "data_files"):
            if getattr(args, flag) is not None:
                raise ReproError(f"--{flag.replace('_', '-')}: python-docs is generated, not read")
        args.python_docs = True
    elif args.hub_id is None and args.data_files is None:
        args.hub_id = openwebtext.OWT_HUB_ID


def cmd_prepare(args) -> None:
    resolve_corpus(args)
    if args.hub_id is not None:
        network.offline_unless_reachable()  # before datasets imports the hub's clients
    from repro.data import prepare  # the preparation side (datasets, pyarrow) only when preparing

    if args.num_proc is not None and args.num_proc < 1:
        raise ReproError(f"--num-proc: {args.num_proc} is not a number of processes (1 or more)")
    if args.python_docs:
        for flag in ("revision", "cache_dir", "expected_docs"):
            if getattr(args, flag) is not None:
                raise ReproError(f"--{flag.replace('_', '-')}: does not apply to --python-docs")
        test_size = python_docs.SMOKE_TEST_SIZE if args.test_size is None else args.test_size
        manifest = prepare.prepare_python_docs(
            args.out, num_proc=args.num_proc, test_size=test_size
        )
    else:
        if args.revision is not None and args.hub_id is None:
            raise ReproError("--revision: applies only to --hub-id")
        if args.hub_id is not None:
            source = corpus.Source(
                "hub", hub_id=args.hub_id, revision=args.revision, cache_dir=args.cache_dir
            )
        else:
            source = corpus.Source(
                "files", data_files=tuple(args.data_files), cache_dir=args.cache_dir
            )
        expected = openwebtext.OWT_DOCUMENTS if args.expected_docs is None else args.expected_docs
        test_size = corpus.TEST_SIZE if args.test_size is None else args.test_size
        manifest = prepare.prepare(
            source, args.out, expected_docs=expected, test_size=test_size, num_proc=args.num_proc
        )
    for name, entry in manifest["splits"].items():
        print(
            f"{Path(args.out) / entry['file']}: {entry['documents']:,} documents, "
            f"{entry['tokens']:,} tokens"
        )


def cmd_verify(args) -> None:
    from repro.data import tokens  # numpy: only when verifying

    for entry in tokens.verify(args.data)["splits"].values():
        print(f"{args.data / entry['file']}: {entry['tokens']:,} tokens, SHA-256 as manifested")


def _prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--corpus",
        choices=CORPORA,
        help="a corpus by name: python-docs (generated) or openwebtext (from the hub, or from "
        "--hub-id / --data-files)",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--data-files",
        nargs="+",
        metavar="GLOB",
        help="local parquet/json/jsonl/txt files with a 'text' column",
    )
    source.add_argument(
        "--hub-id",
        metavar="ID",
        help=f"a Hugging Face dataset (OpenWebText: {openwebtext.OWT_HUB_ID})",
    )
    source.add_argument(
        "--python-docs",
        action="store_true",
        help="the smoke corpus: Python's own documentation, no download",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="where train.bin, val.bin go")
    p.add_argument("--revision", help="hub revision tried first (default: the default branch)")
    p.add_argument("--cache-dir", metavar="DIR", help="datasets cache (default: HF's)")
    p.add_argument(
        "--expected-docs",
        type=int,
        metavar="N",
        help=f"document count to insist on (default {openwebtext.OWT_DOCUMENTS:,}, OpenWebText's)",
    )
    p.add_argument(
        "--test-size",
        type=float,
        metavar="F",
        help=f"val share (default {corpus.TEST_SIZE}; "
        f"--python-docs: {python_docs.SMOKE_TEST_SIZE})",
    )
    p.add_argument(
        "--num-proc", type=int, metavar="N", help="worker processes (default: all cores)"
    )
    p.set_defaults(func=cmd_prepare)


def add_commands(sub) -> None:
    _prepare_parser(
        sub.add_parser("prepare", help="tokenize a corpus into train.bin / val.bin + manifest.json")
    )
    p = sub.add_parser("verify", help="check token files' full SHA-256 against their manifest")
    p.add_argument("--data", type=Path, required=True, help="token files dir, with manifest.json")
    p.set_defaults(func=cmd_verify)
