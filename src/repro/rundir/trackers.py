"""Weights & Biases and MLflow runs (runtime.trackers) fed from metrics.csv's rows as they are
appended, through the libraries' own APIs. metrics.csv stays the record: a tracker that cannot be
imported or started, that fails while logging, or that falls behind (an unreachable server) is said
once, in one line, and dropped, and training goes on.

Each tracker works in a thread of its own, so that neither its start nor its calls make the
training loop wait. Its run's id is kept in trackers.json beside metrics.csv, so that a resume
continues the same tracker run; a step that run already holds (one a crash's resume takes again)
is not logged twice.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

from repro.errors import ReproError
from repro.files import read_json, write_json
from repro.rundir.tensorboard import TAGS

TRACKERS_JSON = "trackers.json"
PROJECT = "repro"  # the W&B project and MLflow experiment, where neither key nor variable names one
BACKLOG = 10_000  # rows a tracker may fall behind before it is dropped (hours of steps)
FINISH_WAIT_S = 60.0  # how long the end of training waits for a tracker's last rows
RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # W&B's ids and MLflow's (32 hex digits)
MAX_STEP = 2**53  # far past any run's steps


def _values(row: dict) -> dict:
    """A metrics.csv row's values under the dashboards' names (TensorBoard's tags)."""
    return {tag: row[column] for column, tag in TAGS.items() if row.get(column) is not None}


class WandbRun:
    """A W&B run: online, offline (a folder `wandb sync` uploads later) or disabled, as
    runtime.wandb_mode, else WANDB_MODE, says."""

    name = "wandb"

    def __init__(self, run_dir: Path, run):
        self.run_dir, self.config, self.runtime = run_dir, run, run.runtime

    def start(self, run_id: str | None) -> tuple[str, int]:
        """The run's id and the first step it does not hold yet."""
        import wandb

        self.run = wandb.init(
            project=self.runtime.tracker_project or os.environ.get("WANDB_PROJECT", PROJECT),
            name=run_name(self.config),
            config=self.config.to_dict(),
            id=run_id,
            resume="allow",
            mode=self.runtime.wandb_mode,  # None: WANDB_MODE, else wandb's default (online)
            dir=None if "WANDB_DIR" in os.environ else self.run_dir,
            settings=wandb.Settings(console="off"),  # train.log is the run's console
        )
        return self.run.id, self.run.step

    def log(self, step: int, values: dict) -> None:
        self.run.log(values, step=step)

    def finish(self) -> None:
        self.run.finish()


class MlflowRun:
    """An MLflow run in the store runtime.mlflow_tracking_uri names, else MLFLOW_TRACKING_URI,
    else MLflow's default (sqlite:///mlflow.db in the working directory)."""

    name = "mlflow"

    def __init__(self, run_dir: Path, run):
        self.config, self.runtime = run, run.runtime

    def start(self, run_id: str | None) -> tuple[str, int]:
        import mlflow

        if self.runtime.mlflow_tracking_uri is not None:
            mlflow.set_tracking_uri(self.runtime.mlflow_tracking_uri)
        experiment = self.runtime.tracker_project or os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if run_id is None:
            mlflow.set_experiment(experiment or PROJECT)
        tags = {"preset": self.config.preset_name, "experiment": self.config.experiment.name}
        run = mlflow.start_run(run_id=run_id, run_name=run_name(self.config), tags=tags)
        self.run_id = run.info.run_id
        held = mlflow.MlflowClient().get_metric_history(self.run_id, TAGS["train_loss"])
        return self.run_id, max((m.step + 1 for m in held), default=0)

    def log(self, step: int, values: dict) -> None:
        import mlflow

        mlflow.log_metrics(values, step=step, run_id=self.run_id)

    def finish(self) -> None:
        import mlflow

        mlflow.end_run()


CLIENTS = {client.name: client for client in (WandbRun, MlflowRun)}


def first_line(error: Exception, limit: int = 200) -> str:
    """An error's message as one printable line: libraries' messages run over several."""
    text = next(iter(str(error).splitlines()), "")
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


def run_name(run) -> str:
    seed = f"/seed{run.seed}" if run.seed else ""
    return f"{run.preset_name}{seed}/{run.experiment.name}"


class Tracker:
    """One tracker's run, started, fed and finished by a thread of its own."""

    def __init__(self, client, saved: dict, ids: "TrackerIds"):
        self.client, self.ids = client, ids
        self.rows: queue.Queue = queue.Queue(BACKLOG)
        self.dropped, self.lock = False, threading.Lock()
        self.thread = threading.Thread(
            target=self._work, args=(saved,), name=f"repro-{client.name}", daemon=True
        )
        self.thread.start()

    def _work(self, saved: dict) -> None:
        try:
            doing = "cannot be imported or started"
            run_id, held = self.client.start(saved.get("run_id"))
            if self.dropped:  # fallen behind meanwhile: nothing more, in the run folder least
                return
            # The steps its run holds: what its library says, or (W&B offline) what was logged
            next_step = max(held, saved.get("next_step", 0))
            self.ids.save(self.client.name, run_id, next_step)
            doing = "failed while logging"
            while (row := self.rows.get()) is not None:
                if self.dropped:
                    return
                if row["step"] >= next_step:
                    self.client.log(row["step"], _values(row))
                    next_step = row["step"] + 1
            doing = "failed as its run finished"
            self.client.finish()
            self.ids.save(self.client.name, run_id, next_step)
        except Exception as e:  # whatever a tracker raises, training goes on
            self.drop(f"{doing} ({type(e).__name__}: {first_line(e)})")
            if doing == "failed while logging":  # its run closed, as far as it still can be
                with suppress(Exception):
                    self.client.finish()

    def append(self, row: dict) -> None:
        if self.dropped:
            return
        try:
            self.rows.put_nowait(row)
        except queue.Full:
            self.drop(f"{BACKLOG:,} rows behind (is its server reachable?)")

    def finish(self) -> None:
        """Wait for its last rows to be logged and its run finished, up to FINISH_WAIT_S."""
        if self.dropped:
            return
        deadline = time.monotonic() + FINISH_WAIT_S
        try:
            self.rows.put(None, timeout=FINISH_WAIT_S)  # the thread, emptying the queue, makes room
        except queue.Full:
            pass
        self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread.is_alive():
            self.drop(f"still logging after {FINISH_WAIT_S:g} s; its run may lack the last steps")

    def drop(self, why: str) -> None:
        """Say once, in one line, why this tracker is dropped."""
        with self.lock:
            if self.dropped:
                return
            self.dropped = True
        print(
            f"warning: {self.client.name}: {why}; training goes on without it "
            f"(metrics.csv is the record)",
            file=sys.stderr,
            flush=True,
        )


class TrackerIds:
    """trackers.json: each tracker's run id and the first step its run lacks, so that a resume
    continues the same run and logs no step twice."""

    def __init__(self, path: Path):
        self.path, self.lock = path, threading.Lock()
        self.runs = {}
        if path.is_symlink():  # the run's own file, never another's through a link
            raise ReproError(f"{path}: a symbolic link, not the run's file of tracker runs")
        if os.path.lexists(path):
            data = read_json(path, ReproError)
            if not isinstance(data, dict):
                raise ReproError(f"{path}: not an object of tracker runs (a {type(data).__name__})")
            for name, saved in data.items():
                _check_saved(path, name, saved)
            self.runs = data

    def save(self, name: str, run_id: str, next_step: int) -> None:
        with self.lock:
            saved = {"run_id": run_id, "next_step": next_step}
            if self.runs.get(name) != saved:
                self.runs = self.runs | {name: saved}
                write_json(self.path, self.runs)


def _check_saved(path: Path, name: str, saved) -> None:
    where = f"{path}: {str(name)[:40]!r}"
    if not isinstance(saved, dict) or set(saved) != {"run_id", "next_step"}:
        raise ReproError(f"{where}: not an object of run_id and next_step")
    run_id, step = saved["run_id"], saved["next_step"]
    if not (isinstance(run_id, str) and RUN_ID.fullmatch(run_id)):
        raise ReproError(f"{where}: run_id {str(run_id)[:40]!r} is not a run id")
    if not (type(step) is int and 0 <= step <= MAX_STEP):
        raise ReproError(f"{where}: next_step {str(step)[:40]!r} is not a step")


class Trackers:
    """The trackers of runtime.trackers for the run in `run_dir`."""

    def __init__(self, run_dir: Path, run):
        self.trackers: list[Tracker] = []
        names = run.runtime.trackers
        try:
            ids = TrackerIds(Path(run_dir) / TRACKERS_JSON)
        except ReproError as e:  # left as it is: a later resume may find it mended
            print(
                f"warning: {e}; training goes on without {', '.join(names)} "
                f"(metrics.csv is the record)",
                file=sys.stderr,
                flush=True,
            )
            return
        for name in names:
            saved = ids.runs.get(name, {})
            self.trackers.append(Tracker(CLIENTS[name](run_dir, run), saved, ids))

    @property
    def on(self) -> list[str]:
        """The trackers not dropped (run.json's `trackers`)."""
        return [t.client.name for t in self.trackers if not t.dropped]

    def append(self, row: dict) -> None:
        for tracker in self.trackers:
            tracker.append(row)

    def close(self) -> None:
        """Finish every tracker: `on` then names those that stayed on to the end."""
        for tracker in self.trackers:
            tracker.finish()
