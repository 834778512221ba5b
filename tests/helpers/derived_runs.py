"""Run directories derived from the tiny baseline run `repro train` wrote, by the package's own
writers (RunRecord, write_metrics): each run's configuration, identity and sizes its own, its
evaluation losses chosen by the test. Fixtures for the results, plots and notebook tests, taken in
by conftest."""

import copy
import functools
from dataclasses import replace
from pathlib import Path

import pytest

from repro.config import config_dir, load_run
from repro.config.schema import ConfigError
from repro.files import make_dir
from repro.rundir import METRICS_CSV, read_record, rows_before, write_metrics


@pytest.fixture(scope="session")
def write_run(tiny_baseline_run):
    """Write a run directory derived from the tiny baseline run `repro train` wrote: its record
    and metrics rows up to `last_step`, as `experiment` at `preset` and `seed` (the configuration,
    identity and parameter counts of that experiment, where the config has it), `status`, with
    the evaluation losses `val` (val at each step of val, train = val + train_offset, the trained
    run's spread; no evaluation at other steps) and, given step_time_s, that time for every step.
    Written by the package's own writers (RunRecord, write_metrics)."""
    trained = read_record(tiny_baseline_run)
    rows = rows_before(tiny_baseline_run / METRICS_CSV, trained.last_step + 1)

    def write(
        run_dir: Path,
        experiment: str,
        val: dict[int, float],
        *,
        last_step: int,
        preset: str = "tiny",
        seed: int = 0,
        status: str = "completed",
        diverged_step: int | None = None,
        train_offset: float = -0.05,
        step_time_s: float | None = None,
    ) -> Path:
        record = replace(
            trained,
            **recorded_configuration(preset, experiment, seed),
            status=status,
            last_step=last_step,
            diverged_step=diverged_step,
            finished=None if status == "running" else trained.finished,
        )
        derived = [
            derived_row(row, val.get(step), train_offset, step_time_s, record.tokens_per_step)
            for step, row in enumerate(rows[: last_step + 1])
        ]
        make_dir(run_dir)
        write_metrics(run_dir / METRICS_CSV, derived)
        record.write(run_dir)
        return run_dir

    return write


def recorded_configuration(preset: str, experiment: str, seed: int) -> dict:
    """What run.json records of `experiment` at `preset` and `seed`, as training records it; of an
    experiment the config does not have, its names only (the trained run's sizes kept). Worked
    out once per content of the config files (a group's test writes hundreds of runs of a few
    experiments; a test that edits the files gets the new content's)."""
    directory = config_dir()
    files = [directory / "experiments.yaml", directory / "presets" / f"{preset}.yaml"]
    contents = tuple(f.read_bytes() if f.is_file() else None for f in files)
    key = (str(directory.resolve()), contents)
    return copy.deepcopy(_recorded_configuration(preset, experiment, seed, key))


@functools.cache
def _recorded_configuration(preset: str, experiment: str, seed: int, config_files: tuple) -> dict:
    from repro.model import parameter_counts  # torch: not where this module is only loaded

    try:
        run = load_run(preset, experiment, seed=seed)
    except ConfigError:
        return {"preset": preset, "experiment": experiment, "identity": {}, "config": {}}
    return {
        "preset": preset,
        "experiment": experiment,
        "identity": run.identity(),
        "config": run.to_dict(),
        "params": parameter_counts(run.model),
        "tokens_per_step": run.tokens_per_step,
    }


def derived_row(row: dict, val, train_offset: float, step_time_s, tokens_per_step: int) -> dict:
    """A trained metrics row with the evaluation loss `val` (None: no evaluation) and, given
    step_time_s, that step time and its throughput."""
    row = dict(row)
    losses = {"eval_val": val, "eval_train": None if val is None else val + train_offset}
    for stream, loss in losses.items():
        row[f"{stream}_loss"] = loss
        if loss is None:
            row[f"{stream}_std"] = None
    if step_time_s is not None:
        row |= {"step_time_s": step_time_s, "tokens_per_s": tokens_per_step / step_time_s}
    return row


@pytest.fixture
def tiny_runs(tmp_path, write_run) -> Path:
    """Runs of the Table 1 experiments at the tiny preset (evaluations at 0, 4, 8, 12; table
    step 12): the nonlinear queries beat the baseline throughout, most at step 4."""
    runs = tmp_path / "runs" / "tiny"
    steps = [0, 4, 8, 12]
    baseline = [10.0, 8.0, 6.0, 5.0]
    gains = {
        "baseline": [0, 0, 0, 0],
        "mlp4.75": [0, 0.01, 0.02, 0.04],
        "mlp4.75-scaled": [0, 0.02, -0.01, 0.03],
        "resgelu-lr2.6e-3": [0, 0.3, 0.1, 0.06],
        "resgelu-lr3e-3": [0, 0.4, 0.12, 0.07],
    }
    for name, gain in gains.items():
        write_run(
            runs / name, name, {s: b - g for s, b, g in zip(steps, baseline, gain)}, last_step=12
        )
    return runs
