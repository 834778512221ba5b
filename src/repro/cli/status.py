"""`repro status`: each run of a preset, its step, last validation loss, speed, ETA and holder
(the summaries: repro.analysis.status), shown as a table a terminal prints as text."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from repro.errors import printable
from repro.rundir import duration


def cmd_status(args) -> None:
    from repro.analysis import status

    planned, unplanned = status.workflow_plan(args.config_dir, args.preset)
    table = status.status_table(args.runs_dir, args.preset, args.authors_runs_dir, planned)
    if unplanned:  # the runs there are are listed all the same
        print(f"repro: warning: {printable(unplanned)}", file=sys.stderr)
    print(format_status(table) if table else status.no_run(args.runs_dir, args.preset))
    if planned:
        print(status.planned_done(table, planned))


def number(value, fmt: str) -> str:
    """A value as `fmt`, or "-" where there is none."""
    return format(value, fmt) if value is not None and not math.isnan(value) else "-"


def format_status(table: list[dict]) -> str:
    """The table as text, every value printable (names and statuses come from files: a terminal
    escape in one is shown, not acted on)."""
    if not table:
        return "no runs"
    columns = {
        "preset": [r["preset"] for r in table],
        "seed": [str(r["seed"]) for r in table],
        "experiment": [r["experiment"] for r in table],
        "status": [r["status"] for r in table],
        "step": [f"{number(r['last_step'], '.0f')}/{number(r['max_step'], '.0f')}" for r in table],
        "val loss": [number(r["last_eval_val_loss"], ".4f") for r in table],
        "at step": [number(r["last_eval_step"], ".0f") for r in table],
        "tokens/s": [number(r["tokens_per_s"], ",.0f") for r in table],
        "ETA": ["-" if r["eta_s"] is None else duration(r["eta_s"]) for r in table],
        "trainer": [r["trainer"] or "-" for r in table],
        "vs authors": [r["vs_authors"] or "-" for r in table],
        "folder": [r["folder"] for r in table],  # two copies of an experiment told apart
    }
    columns = {head: [printable(v) for v in values] for head, values in columns.items()}
    widths = [max(map(len, [head, *values])) for head, values in columns.items()]
    lines = [list(columns), *zip(*columns.values())]
    problems = [printable(f"{r['folder']}: {r['problem']}") for r in table if r["problem"]]
    return "\n".join(
        [*(" ".join(v.rjust(w) for v, w in zip(line, widths)) for line in lines), *problems]
    )


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
        "--config-dir",
        type=Path,
        default=Path("config"),
        help="the workflow's config folder: its config.yaml and presets say which runs `all` "
        "trains, listed as queued until they start (default: config)",
    )
    p.add_argument(
        "--authors-runs-dir",
        type=Path,
        default=Path("results/authors/runs"),
        help="the authors' imported runs, one folder per preset: the `vs authors` column "
        "compares each run with theirs (default: results/authors/runs)",
    )
    p.set_defaults(func=cmd_status)
