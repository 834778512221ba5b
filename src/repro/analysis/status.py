"""`repro status`: where each run of a preset stands, and whether a trainer is holding it."""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path

import pandas as pd

from repro.analysis.results import list_runs
from repro.errors import ReproError
from repro.rundir import LIVE
from repro.runtime.progress import duration

LOCK_FILE = ".lock"  # what a trainer holds in live/ (issue 9: "host NAME, PID N")


def trainer_holding(run_dir: Path) -> str | None:
    """The trainer holding a run ("PID N"), from its lock file; None if none is alive here.

    Reads the file rather than testing the lock, so that asking never keeps a trainer out."""
    try:
        text = (Path(run_dir) / LIVE / LOCK_FILE).read_text()
    except OSError:
        return None
    host, _, pid = text.strip().removeprefix("host ").partition(", PID ")
    if not pid.isdigit():
        return None
    if host != socket.gethostname():
        return f"{host} PID {pid} (another host)"
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return f"PID {pid}"


def status_table(runs_dir: Path, preset: str | None = None) -> pd.DataFrame:
    """One row per run of `preset` (default: every preset) under runs_dir."""
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
        runs["trainer"] = [trainer_holding(Path(runs_dir) / name / e) for e in runs["experiment"]]
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
