"""`repro status`, in plain Python (no pandas, numpy or torch) so that it starts at once."""

from __future__ import annotations

import math
import socket
import statistics
from pathlib import Path

from repro.config import folder_seed, is_preset_name, load_experiments, load_preset
from repro.config.plan import WORKFLOW_CONFIG, PlannedRun, planned_runs, workflow_config
from repro.errors import ReproError, printable
from repro.rundir import (
    LIVE,
    METRICS_CSV,
    files_dir,
    has_run,
    read_record,
    tail_rows,
)
from repro.runtime.lock import LOCK_FILE, held_here, holder

RUN_COLUMNS = [
    "experiment",
    "status",
    "problem",
    "last_step",
    "max_step",
    "last_eval_step",
    "last_eval_val_loss",
    "tokens_per_s",
    "eta_s",
    "folder",  # the run's folder, which may be named otherwise than its experiment
]
RECENT_STEPS = 50  # the steps whose median speed the ETA assumes
NOT_STARTED = "not started"  # a trainer took the folder, no step yet (run.json unwritten)
QUEUED = "queued"  # planned by the workflow (repro.config.plan), no folder yet


def run_summary(run_dir: Path) -> dict:
    """A run's status, last step (metrics.csv's: run.json's is written at start and end), speed."""
    files = files_dir(run_dir)
    record = read_record(files)
    rows = tail_rows(files / METRICS_CSV)  # the last steps: a metrics.csv can hold millions
    evals = [r for r in rows if _number(r["eval_val_loss"])]  # a diverged (NaN) one is none
    recent = rows[-RECENT_STEPS:]
    # The identity, not the config: read_record gives it in today's layout.
    max_step = record.identity.get("train", {}).get("max_step")
    last_step = int(rows[-1]["step"]) if rows else None
    # rows past max_step (a run.json edited, or another run's metrics): nothing is left
    left = max(max_step - last_step, 0) if None not in (max_step, last_step) else None
    step_time = _median(r["step_time_s"] for r in recent)
    running = record.status == "running" and left is not None and step_time is not None
    return {
        "experiment": record.experiment,
        "status": record.status,
        "problem": None,
        "last_step": last_step,
        "max_step": max_step,
        "last_eval_step": int(evals[-1]["step"]) if evals else None,
        "last_eval_val_loss": evals[-1]["eval_val_loss"] if evals else None,
        "tokens_per_s": _median(r["tokens_per_s"] for r in recent),
        "eta_s": left * step_time if running else None,
        "folder": Path(run_dir).name,
    }


def _number(value) -> bool:
    return value is not None and not math.isnan(value)


def _median(values) -> float | None:
    numbers = [v for v in values if _number(v)]
    return statistics.median(numbers) if numbers else None


def summaries(runs_dir: str | Path, names: list[str] | None = None) -> list[dict]:
    """run_summary of each run under runs_dir; an unreadable one is "damaged", hiding no other."""
    dirs = folders(runs_dir) if names is None else [Path(runs_dir) / n for n in names]
    return [summary(d) for d in dirs if _is_run(d)]


def summary(run_dir: Path) -> dict:
    """run_summary, "damaged" where it cannot be read, or "not started" where no run.json is yet."""
    return _summary_or_problem(run_dir) if _has_run(run_dir) else _not_started(run_dir)


def _is_run(run_dir: Path) -> bool:
    return _has_run(run_dir) or _locked(run_dir)


def seed_folders(preset_dir: Path) -> list[tuple[int, Path]]:
    """Each folder of a preset that may hold a run, with its seed, in the workflow's layout
    (rules/train.smk): seed 0's in the preset's folder, seed k's in its seed<k>/ (seed_dir)."""
    found = []
    for entry in folders(preset_dir):
        seed = folder_seed(entry.name)
        if seed is None:
            found.append((0, entry))
        elif entry.is_dir():
            found += [(seed, run_dir) for run_dir in folders(entry)]
    return sorted(found)


def _locked(run_dir: Path) -> bool:
    """Whether a trainer has taken the folder (its .lock) before writing run.json: it builds the
    model, probes its micro-batch, which can take minutes."""
    return any((d / LOCK_FILE).is_file() for d in (run_dir, run_dir / LIVE))


def _not_started(run_dir: Path) -> dict:
    return dict.fromkeys(RUN_COLUMNS) | {
        "experiment": run_dir.name, "status": NOT_STARTED, "folder": run_dir.name,
    }  # fmt: skip


def folders(path: str | Path) -> list[Path]:
    """The entries of a folder, sorted; one that cannot be read is a one-line error."""
    try:
        return sorted(Path(path).iterdir())
    except OSError as e:
        raise ReproError(f"{path}: cannot be read ({e.strerror})") from None


def _has_run(run_dir: Path) -> bool:
    try:
        return has_run(run_dir)
    except OSError:  # a folder that cannot be read: its run is listed, as damaged
        return True


def _summary_or_problem(run_dir: Path) -> dict:
    try:
        return run_summary(run_dir)
    except OSError as e:
        problem = f"{run_dir}: cannot be read ({e.strerror})"
        return dict.fromkeys(RUN_COLUMNS) | {
            "experiment": run_dir.name, "status": "damaged", "problem": problem,
            "folder": run_dir.name,
        }  # fmt: skip
    except ReproError as e:
        return dict.fromkeys(RUN_COLUMNS) | {
            "experiment": run_dir.name, "status": "damaged", "problem": str(e),
            "folder": run_dir.name,
        }  # fmt: skip


UNKNOWN = "unknown"


def trainer_holding(run_dir: Path) -> str | None:
    """ "PID N" of a trainer of this machine holding the run's lock; another host's is "unknown"."""
    live = Path(run_dir) / LIVE
    held = holder(live)
    if held is None:
        return None
    host, pid = held
    if host != socket.gethostname():
        return f"{UNKNOWN} ({host} PID {pid}, another host)"
    return f"PID {pid}" if held_here(live) else None


def _unknown_elsewhere(run: dict) -> dict:
    """A run under another machine's lock may have stopped: "unknown", not "running"."""
    if (run["trainer"] or "").startswith(UNKNOWN):
        if run["status"] == "running":
            run["status"] = UNKNOWN
        else:
            run["trainer"] = None
    return run


def against_authors(run_dir: Path, authors_dir: Path) -> str | None:
    if not has_run(authors_dir):
        return None
    from repro.analysis import compare  # pandas: only where there is a run of theirs to compare
    from repro.analysis.runs import read_run

    table, _ = compare.compare_runs(read_run(run_dir), read_run(authors_dir))
    return compare.latest(table)


def _others(runs_dir) -> str:
    """The presets that have runs in runs_dir, for an error naming another."""
    if not Path(runs_dir).is_dir():
        return ""
    started = [p.name for p in folders(runs_dir) if p.is_dir()]
    return f"; presets with runs in {runs_dir}: {', '.join(map(printable, started)) or 'none'}"


def check_preset_name(preset: str | None, named_by: str = "--preset") -> None:
    if preset is not None and not is_preset_name(preset):
        raise ReproError(f"{named_by} {preset!r}: not a preset's name (a folder of --runs-dir)")


def workflow_plan(config_dir: Path, preset: str | None = None) -> tuple[list[PlannedRun], str]:
    """The runs the workflow's `all` trains at `preset` (default: config.yaml's), as its
    Snakefile plans them from config_dir; none, and the line that says why, where config.yaml,
    the preset or the experiments cannot be read."""
    check_preset_name(preset)
    try:
        settings = workflow_config(config_dir)
        name = preset or settings["preset"]
        check_preset_name(name, f"{Path(config_dir, WORKFLOW_CONFIG)}: preset")
        planned = planned_runs(
            load_preset(str(Path(config_dir, "presets", f"{name}.yaml"))),
            load_experiments(directory=config_dir),
            settings["seeds"],
            settings["extra_experiments"],
        )
    except ReproError as e:  # a ConfigError, or a preset in config.yaml that is no folder name
        return [], f"{e}; the workflow's planned runs are not listed"
    return planned, ""


def status_table(
    runs_dir: Path,
    preset: str | None = None,
    authors_runs_dir: Path | None = None,
    planned: list[PlannedRun] = (),
) -> list[dict]:
    """One summary per run of `preset` (default: all), with its trainer and against the authors',
    then a "queued" row per planned run (workflow_plan) that has no folder yet."""
    runs_dir = Path(runs_dir)
    check_preset_name(preset)
    searched = runs_dir / (preset or "")
    if not searched.is_dir() and not planned:
        which = "of this preset" if preset else "of any preset"
        raise ReproError(
            f"{searched}: no such folder (no run {which} has started here{_others(runs_dir)}; "
            f"--runs-dir names the folder of the presets' runs)"
        )
    started = [p.name for p in folders(runs_dir) if p.is_dir()] if runs_dir.is_dir() else []
    table = []
    for name in dict.fromkeys([*([preset] if preset else started), *(r.preset for r in planned)]):
        runs = _runs(runs_dir, name, authors_runs_dir) if (runs_dir / name).is_dir() else []
        there = {run["folder"] for run in runs}
        table += runs + [_queued(r) for r in planned if r.preset == name and r.folder not in there]
    return table


def _runs(runs_dir: Path, name: str, authors_runs_dir: Path | None) -> list[dict]:
    runs = []
    for seed, run_dir in seed_folders(runs_dir / name):
        if not _is_run(run_dir):
            continue
        run = summary(run_dir) | {
            "preset": name, "seed": seed, "folder": str(run_dir.relative_to(runs_dir)),
            "trainer": trainer_holding(run_dir),
        }  # fmt: skip
        if run["status"] == NOT_STARTED and run["trainer"]:
            run["status"] = "starting"  # its trainer is at work
        theirs = None if authors_runs_dir is None else Path(authors_runs_dir) / name
        run["vs_authors"] = theirs and against_authors(run_dir, theirs / run["experiment"])
        runs.append(_unknown_elsewhere(run))
    return runs


def _queued(run: PlannedRun) -> dict:
    return dict.fromkeys(RUN_COLUMNS) | {
        "preset": run.preset, "seed": run.seed, "experiment": run.experiment, "status": QUEUED,
        "folder": run.folder, "trainer": None, "vs_authors": None,
    }  # fmt: skip


def planned_done(table: list[dict], planned: list[PlannedRun]) -> str:
    """ "k of n planned runs done": the planned runs whose folder holds a completed run."""
    completed = {row["folder"] for row in table if row["status"] == "completed"}
    done = sum(run.folder in completed for run in planned)
    return f"{done} of {len(planned)} planned runs done"


def no_run(runs_dir: Path, preset: str | None) -> str:
    """What `repro status` says where it found no run: which and where it looked."""
    if preset:
        return f"no run of preset {printable(preset)} in {printable(Path(runs_dir) / preset)}"
    return f"no run of any preset in {printable(runs_dir)}"


def list_runs(runs_dir: str | Path, names: list[str] | None = None):
    """The summaries as a pandas table, for a notebook (pandas imported here alone: `repro status`
    starts without it)."""
    import pandas as pd

    return pd.DataFrame(summaries(runs_dir, names), columns=RUN_COLUMNS)
