"""Runs -> tables and curves: Table 1 and the relative improvement over the baseline.

A run directory (results/runs/<preset>/<experiment>/, repro.rundir) holds metrics.csv, one row per
optimiser step whose eval_* columns are filled at evaluation steps only, and run.json, what was run
and how it ended. Everything here reads those two files; nothing trains or plots.

Relative improvement (docs/specification.md §3): (L_baseline - L) / L_baseline, positive when L
beats the baseline.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from repro.config import Experiment, Preset, load_config, load_preset, resolve_run
from repro.errors import ReproError
from repro.files import read_regular
from repro.rundir import (
    METRICS_BYTES,
    METRICS_COLUMNS,
    METRICS_CSV,
    RUN_JSON,
    RunError,
    RunRecord,
    files_dir,
    identity_differences,
    read_record,
)

TABLE1_COLUMNS = [
    "experiment",
    "query_mode",
    "mlp_ratio",
    "lr_max",
    "lr_min",
    "weight_decay",
    "non_embedding_params",
    "step",
    "val_loss",
    "rel_improvement",
    "paper_val_loss",
    "paper_rel_improvement",
    "status",
    "preset",
    "config_differences",
    "caveat",
]


@dataclass(frozen=True)
class Run:
    """One run directory, read: its metrics (one row per step) and its run.json."""

    path: Path
    metrics: pd.DataFrame
    record: RunRecord

    @property
    def name(self) -> str:
        return self.record.experiment

    @property
    def status(self) -> str:
        return self.record.status

    def evals(self) -> pd.DataFrame:
        """The evaluation rows only (step, eval_train_loss, eval_val_loss, ...), indexed by step."""
        evals = self.metrics.dropna(subset=["eval_val_loss"])
        return evals.set_index("step")[
            ["eval_train_loss", "eval_train_std", "eval_val_loss", "eval_val_std"]
        ]

    def loss_at(self, step: int, split: str = "val") -> float:
        """The evaluation loss at `step` (NaN if the run has no evaluation there)."""
        evals = self.evals()
        return float(evals.at[step, f"eval_{split}_loss"]) if step in evals.index else math.nan


def read_run(run_dir: str | Path) -> Run:
    """Read metrics.csv and run.json of a run directory (its live/ folder while it trains)."""
    run_dir = files_dir(run_dir)
    record = read_record(run_dir)
    if not (run_dir / METRICS_CSV).exists():
        raise RunError(f"{run_dir / METRICS_CSV}: no such file (has this run been trained?)")
    return Run(path=run_dir, metrics=read_metrics(run_dir / METRICS_CSV), record=record)


def read_metrics(path: Path) -> pd.DataFrame:
    """metrics.csv, checked: its header, then one row per step from 0, each value a number.

    A last line without its newline is one being written (a run in progress): left out."""
    try:
        text = read_regular(path, METRICS_BYTES, RunError, "a metrics file").decode("utf-8")
    except UnicodeDecodeError as e:
        raise RunError(f"{path}: cannot be read ({e})") from None
    if not text.startswith(",".join(METRICS_COLUMNS)):
        raise RunError(f"{path}: not a metrics file (no header {METRICS_COLUMNS[0]},...)")
    metrics = pd.read_csv(io.StringIO(text[: text.rfind("\n") + 1]), dtype=str)
    numbers = metrics.apply(pd.to_numeric, errors="coerce")
    written_nan = metrics.apply(lambda column: column.str.lower() == "nan")  # a diverged loss
    bad = (numbers.isna() & metrics.notna() & ~written_nan).to_numpy().nonzero()
    if len(bad[0]):
        row, column = bad[0][0], metrics.columns[bad[1][0]]
        raise RunError(
            f"{path}, line {row + 2}: {column} {metrics.iat[row, bad[1][0]][:40]!r} is not a number"
        )
    wrong = (numbers["step"].to_numpy() != np.arange(len(numbers))).nonzero()[0]
    if len(wrong):
        raise RunError(
            f"{path}, line {wrong[0] + 2}: step {metrics['step'][wrong[0]]}, expected {wrong[0]} "
            f"(rows missing or moved)"
        )
    numbers["step"] = numbers["step"].astype(int)
    return numbers


def has_run(run_dir: str | Path) -> bool:
    """Whether a run directory (or its live/ folder) holds a run to read."""
    files = files_dir(run_dir)
    return (files / RUN_JSON).exists() and (files / METRICS_CSV).exists()


def read_runs(runs_dir: str | Path, names: list[str]) -> dict[str, Run]:
    """The runs of `names` under runs_dir (results/runs/<preset>/), those in progress too;
    missing ones are left out."""
    return {
        name: read_run(Path(runs_dir) / name) for name in names if has_run(Path(runs_dir) / name)
    }


def read_run_list(runs_dir: str | Path, runs: str | Path | list) -> dict[str, Run]:
    """The runs a user lists (one, or a list), keyed by what was written: each a folder under
    runs_dir (`baseline`, `seed1/baseline`) or else the path of any run folder (the authors'
    imported runs, another preset's). A run that is in neither place is an error."""
    listed = [runs] if isinstance(runs, (str, Path)) else list(runs)
    picked = {}
    for entry in listed:
        under = Path(runs_dir) / str(entry)
        picked[str(entry)] = read_run(under if has_run(under) else Path(entry))
    return picked


def evals_table(runs: dict[str, Run]) -> pd.DataFrame:
    """The evaluations of several runs, one row per run and evaluation step."""
    return pd.concat({label: run.evals() for label, run in runs.items()}, names=["run"])


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
]
RECENT_STEPS = 50  # the steps whose median speed the ETA assumes


def run_summary(run: Run) -> dict:
    """Where a run stands: status, last step (of metrics.csv: run.json's is written only at the
    start and end), its last evaluation, its recent speed and, while it runs, the time left."""
    evals, recent = run.evals(), run.metrics.tail(RECENT_STEPS)
    # The identity, not the config: read_record translates an earlier version's to today's layout.
    max_step = run.record.identity.get("train", {}).get("max_step")
    last_step = int(run.metrics["step"].iloc[-1]) if len(run.metrics) else None
    left = (max_step - last_step) if None not in (max_step, last_step) else None
    running = run.status == "running" and left is not None and len(recent)
    return {
        "experiment": run.name,
        "status": run.status,
        "problem": None,
        "last_step": last_step,
        "max_step": max_step,
        "last_eval_step": evals.index.max() if len(evals) else None,
        "last_eval_val_loss": evals["eval_val_loss"].iloc[-1] if len(evals) else None,
        "tokens_per_s": recent["tokens_per_s"].median() if len(recent) else None,
        "eta_s": left * recent["step_time_s"].median() if running else None,
    }


def list_runs(runs_dir: str | Path, names: list[str] | None = None) -> pd.DataFrame:
    """Every run under runs_dir (results/runs/<preset>/), or those of `names`, those in progress
    too: one row of run_summary each."""
    dirs = (
        sorted(Path(runs_dir).iterdir()) if names is None else [Path(runs_dir) / n for n in names]
    )
    rows = [_summary_or_problem(d) for d in dirs if has_run(d)]
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


def _summary_or_problem(run_dir: Path) -> dict:
    """run_summary of a run, or, for a run whose files cannot be read, status "damaged" and
    the reason: one damaged run never hides the others."""
    try:
        return run_summary(read_run(run_dir))
    except ReproError as e:
        return {"experiment": run_dir.name, "status": "damaged", "problem": str(e)}


def relative_improvement(loss: float | pd.Series, baseline: float | pd.Series):
    """(L_baseline - L) / L_baseline (§3)."""
    return (baseline - loss) / baseline


def relative_improvement_curves(
    runs: dict[str, Run],
    baseline: str,
    split: str = "val",
    first_step: int = 1,
    last_step: int | None = None,
) -> pd.DataFrame:
    """Relative improvement over the baseline at each evaluation step both runs have.

    A long table: experiment, step, loss, baseline_loss, rel_improvement; steps in
    [first_step, last_step] (the paper plots 1k..59k: step 0 is the untrained model).
    """
    base = runs[baseline].evals()[f"eval_{split}_loss"].rename("baseline_loss")
    frames = []
    for name, run in runs.items():
        if name == baseline:
            continue
        both = pd.concat(
            [run.evals()[f"eval_{split}_loss"].rename("loss"), base], axis=1, join="inner"
        ).reset_index()
        both.insert(0, "experiment", name)
        frames.append(both)
    columns = ["experiment", "step", "loss", "baseline_loss", "rel_improvement"]
    if not frames:
        return pd.DataFrame(columns=columns)
    curves = pd.concat(frames, ignore_index=True)
    curves["rel_improvement"] = relative_improvement(curves["loss"], curves["baseline_loss"])
    keep = curves["step"] >= first_step
    if last_step is not None:
        keep &= curves["step"] <= last_step
    return curves.loc[keep, columns].reset_index(drop=True)


def loss_curves(
    runs: dict[str, Run], first_step: int = 1, last_step: int | None = None
) -> pd.DataFrame:
    """Evaluation losses of every run: experiment, step, split (train|val), loss."""
    frames = []
    for name, run in runs.items():
        evals = run.evals().reset_index()
        for split in ("train", "val"):
            frames.append(
                pd.DataFrame(
                    {
                        "experiment": name,
                        "step": evals["step"],
                        "split": split,
                        "loss": evals[f"eval_{split}_loss"],
                    }
                )
            )
    curves = pd.concat(frames, ignore_index=True)
    keep = curves["step"] >= first_step
    if last_step is not None:
        keep &= curves["step"] <= last_step
    return curves[keep].reset_index(drop=True)


def recorded_configuration(
    experiment: Experiment, run: Run | None, preset: Preset
) -> tuple[dict, str]:
    """The experiment's settings as the run recorded them (as the experiments file has them where
    there is no run), and the keys in which the run differs from the files now ("" if none)."""
    current = {
        "query_mode": experiment.query_mode,
        "mlp_ratio": experiment.mlp_ratio,
        **asdict(experiment.optimizer),
    }
    if run is None:
        return current, ""
    # run.json's identity is in today's layout whichever version wrote it (repro.rundir).
    recorded = {
        **current,
        **run.record.config.get("experiment", {}),
        **run.record.identity.get("optimizer", {}),
    }
    return recorded, "; ".join(run_differences(run, experiment, preset))


def run_differences(run: Run, experiment: Experiment, preset: Preset) -> list[str]:
    """What the run recorded that `experiment` at `preset` (the files as they are now) is not:
    another experiment's run.json in its folder, or settings edited since it was trained. Empty
    where the run stands for the experiment; every table that reads runs checks this."""
    named = run.record.experiment
    other = [] if named == experiment.name else [f"experiment: {named!r} -> {experiment.name!r}"]
    now = resolve_run(preset, experiment).identity()
    return other + identity_differences(run.record.identity, now)


def scale_caveat(preset: Preset, config_dir: str | Path | None = None) -> str:
    """Empty for a preset at the paper's scale (its model and training as the `paper` preset's),
    else the words that say its numbers cannot test the paper, to print next to them."""
    paper = load_preset("paper", config_dir)
    if (preset.model, preset.train) == (paper.model, paper.train):
        return ""
    if (preset.model, preset.corpus) == (paper.model, paper.corpus):
        return (
            f"preset {preset.name} is the paper's model and data on a shorter schedule "
            f"({preset.train.max_step + 1} steps): a screen of the paper's claims, not its numbers"
        )
    if preset.corpus == paper.corpus and preset.model.d_model > paper.model.d_model:
        m = preset.model
        return (
            f"preset {preset.name} is a larger model than the paper's ({m.n_layer} layers, "
            f"d_model {m.d_model}) on its data: whether its claims hold one size up, not its "
            f"numbers"
        )
    return (
        f"preset {preset.name} is not the paper's scale: these numbers show that the "
        f"pipeline runs, they cannot test the paper"
    )


def table1_row(
    experiment: Experiment, run: Run | None, preset: Preset, baseline_loss: float
) -> dict:
    """One row of Table 1: the configuration the run was trained with, its loss at the table
    step, the paper's numbers; config_differences names what the configuration files now say
    otherwise (the run was trained before an edit: retrain it to report the new setting)."""
    step = preset.report.table_step
    loss = run.loss_at(step) if run is not None else math.nan
    params = run.record.params if run is not None else {}
    paper = experiment.paper
    recorded, differences = recorded_configuration(experiment, run, preset)
    return {
        "experiment": experiment.name,
        **{key: recorded[key] for key in TABLE1_COLUMNS[1:6]},
        "non_embedding_params": params.get("non_embedding_params"),
        "step": step,
        "val_loss": loss,
        "rel_improvement": relative_improvement(loss, baseline_loss),
        "paper_val_loss": paper.val_loss if paper else None,
        "paper_rel_improvement": paper.rel_improvement if paper else None,
        "status": run.status if run is not None else "missing",
        "preset": preset.name,
        "config_differences": differences,
    }


def table1(
    runs_dir: str | Path,
    preset: str | Preset,
    group: str = "table1",
    config_dir: str | Path | None = None,
    authors_runs_dir: str | Path | None = None,
) -> pd.DataFrame:
    """Table 1 (§3) from the runs under runs_dir: one row per experiment of the group.

    The loss is the validation evaluation at the preset's report.table_step (59,000 on the paper
    preset, the last evaluation on smoke); NaN where the run has no evaluation there
    (missing, or diverged before it). With authors_runs_dir (runs imported from the authors'
    artefacts, repro.authors.runs), their loss and relative improvement stand in authors_* columns.
    """
    if authors_runs_dir is not None:
        table = table1(runs_dir, preset, group, config_dir)
        theirs = table1(authors_runs_dir, preset, group, config_dir)
        for column in ("val_loss", "rel_improvement", "status"):
            table[f"authors_{column}"] = theirs[column]
        return table
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group(group)
    runs = read_runs(runs_dir, [e.name for e in members])
    base = runs.get(experiments.baseline)
    baseline_loss = base.loss_at(preset.report.table_step) if base is not None else math.nan
    rows = [table1_row(e, runs.get(e.name), preset, baseline_loss) for e in members]
    table = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    table["caveat"] = scale_caveat(preset, config_dir)
    table["non_embedding_params"] = table["non_embedding_params"].astype("Int64")
    return table
