"""`repro status`: each run of a preset, its step, last validation loss, speed, ETA and holder
(repro.analysis.status)."""

from __future__ import annotations

from pathlib import Path


def cmd_status(args) -> None:
    from repro.analysis import status

    table = status.status_table(args.runs_dir, args.preset, args.authors_runs_dir)
    print(status.format_status(table))


def add_commands(sub) -> None:
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
