"""`repro status`: where each run of a preset stands, and whether a trainer is holding it."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import pandas as pd

from repro.analysis import compare
from repro.analysis.runs import has_run, list_runs, read_run
from repro.errors import ReproError
from repro.rundir import LIVE, duration
from repro.runtime.lock import held_here, holder

UNKNOWN = "unknown"


def trainer_holding(run_dir: Path) -> str | None:
    """The trainer holding a run ("PID N"), from the lock file of its live/ folder (the one
    repro.runtime.lock writes), where a process of this machine holds that lock now; None where
    none does (a stale lock: its trainer has ended). A lock from another machine cannot be
    checked from here: "unknown (HOST PID N, another host)"."""
    live = Path(run_dir) / LIVE
    held = holder(live)
    if held is None:
        return None
    host, pid = held
    if host != socket.gethostname():
        return f"{UNKNOWN} ({host} PID {pid}, another host)"
    return f"PID {pid}" if held_here(live) else None


def _unknown_elsewhere(runs: pd.DataFrame) -> pd.DataFrame:
    """A run in progress whose lock is another machine's may have stopped there (preempted,
    killed): its status is "unknown", not "running". A finished run's lock from another machine
    names the trainer that finished it: no trainer is shown."""
    elsewhere = runs["trainer"].map(lambda t: isinstance(t, str) and t.startswith(UNKNOWN))
    running = runs["status"] == "running"
    runs.loc[elsewhere & running, "status"] = UNKNOWN
    runs.loc[elsewhere & ~running, "trainer"] = None
    return runs


def against_authors(run_dir: Path, authors_dir: Path) -> str | None:
    """The run's last common evaluation against the authors' imported run of its experiment
    (repro.analysis.compare), or None where there is none."""
    if not has_run(authors_dir):
        return None
    table, _ = compare.compare_runs(read_run(run_dir), read_run(authors_dir))
    return compare.latest(table)


def status_table(
    runs_dir: Path, preset: str | None = None, authors_runs_dir: Path | None = None
) -> pd.DataFrame:
    """One row per run of `preset` (default: every preset) under runs_dir; with
    authors_runs_dir (their imported runs, <preset>/<experiment>), each against theirs."""
    folder = Path(runs_dir) / (preset or "")
    if not folder.is_dir():
        raise ReproError(
            f"{folder}: no such folder (no run of this preset has started here; "
            f"--runs-dir names the folder of the presets' runs)"
        )
    presets = [preset] if preset else sorted(p.name for p in Path(runs_dir).iterdir() if p.is_dir())
    frames = []
    for name in presets:
        runs = list_runs(Path(runs_dir) / name)
        runs.insert(0, "preset", name)
        runs["trainer"] = [trainer_holding(Path(runs_dir) / name / f) for f in runs["folder"]]
        runs = _unknown_elsewhere(runs)
        runs["vs_authors"] = [
            against_authors(Path(runs_dir) / name / f, Path(authors_runs_dir) / name / e)
            if authors_runs_dir is not None
            else None
            for f, e in zip(runs["folder"], runs["experiment"])
        ]
        frames.append(runs)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def number(value, fmt: str) -> str:
    """A value as `fmt`, or "-" where there is none."""
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else format(value, fmt)
    )


def format_status(table: pd.DataFrame) -> str:
    """The table as `repro status` prints it."""
    if table.empty:
        return "no runs"
    shown = pd.DataFrame(
        {
            "preset": table["preset"],
            "experiment": table["experiment"],
            "status": table["status"],
            "step": [
                f"{number(s, '.0f')}/{number(m, '.0f')}"
                for s, m in zip(table["last_step"], table["max_step"])
            ],
            "val loss": [number(v, ".4f") for v in table["last_eval_val_loss"]],
            "at step": [number(v, ".0f") for v in table["last_eval_step"]],
            "tokens/s": [number(v, ",.0f") for v in table["tokens_per_s"]],
            "ETA": ["-" if pd.isna(v) else duration(v) for v in table["eta_s"]],
            "trainer": [h if isinstance(h, str) else "-" for h in table["trainer"]],
            "vs authors": [v if isinstance(v, str) else "-" for v in table["vs_authors"]],
        }
    )
    problems = [
        f"{preset}/{experiment}: {problem}"
        for preset, experiment, problem in zip(
            table["preset"], table["experiment"], table["problem"]
        )
        if isinstance(problem, str)
    ]
    return "\n".join([shown.to_string(index=False), *problems])
