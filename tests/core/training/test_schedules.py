"""Schedules other than the paper's: the screening preset (the paper's model and data on a
shorter schedule), the authors' long untied runs, whose length scales with the preset and
whose indices the workflow draws for their own number of steps, and a preset's learning-rate
schedule (train.schedule: cosine to lr_min, the paper's, or linear decay to zero)."""

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, random_token_files
from workflow_helpers import copy_workflow, snakemake

from repro.config import load_config, load_preset, resolve_run
from repro.data.indices import draw_indices, write_indices
from repro.rundir.history import with_later_defaults
from repro.training.loop import Schedule


def test_screen_keeps_the_papers_model_data_and_evaluation():
    screen, paper = load_preset("screen"), load_preset("paper")
    assert screen.model == paper.model and screen.corpus == paper.corpus
    same = ("batch_size", "eval_sequences", "eval_micro_batch", "warmup_steps", "index_seed")
    assert all(getattr(screen.train, k) == getattr(paper.train, k) for k in same)
    t = screen.train
    assert (t.max_step, t.decay_steps, t.eval_interval, screen.report.table_step) == (
        6000,
        6000,
        500,
        6000,
    )


def test_screen_warms_up_fully_and_decays_within_its_horizon():
    t, (lr_max, lr_min) = load_preset("screen").train, (3e-3, 3e-5)
    lr = [
        Schedule(lr_max, lr_min, t.warmup_steps, t.decay_steps, t.schedule)(s) for s in range(6001)
    ]
    assert lr[0] == pytest.approx(lr_max / 2001) and lr[1999] == pytest.approx(lr_max * 2000 / 2001)
    assert lr[2000] == pytest.approx(lr_max) and max(lr) == pytest.approx(lr_max)
    assert lr[4000] == pytest.approx((lr_max + lr_min) / 2)  # halfway through the cosine
    assert lr[6000] == pytest.approx(lr_min)


def test_screen_indices_are_its_own_and_the_papers_first_rows(tmp_path):
    data = random_token_files(tmp_path / "data", train_tokens=50_000, val_tokens=5_000)
    screen = load_preset("screen")
    sidecar = write_indices(screen, data, tmp_path / "screen")
    assert (sidecar["train_rows"], sidecar["eval_rows"], sidecar["seed"]) == (6001, 600, 42)
    train = np.load(tmp_path / "screen" / "train.npy")
    longer = draw_indices(
        50_000,
        5_000,
        train_rows=6100,
        sequences_per_step=480,
        eval_rows=600,
        eval_sequences=2400,
        block_size=1024,
    )
    assert np.array_equal(train, longer["train"][:6001])  # a longer draw begins with these rows


def test_the_untied_schedule_scales_with_the_preset():
    for preset, steps in (
        ("paper", (105001, 600000)),
        ("screen", (10500, 59998)),
        ("smoke", (52, 300)),
        ("tiny", (21, 120)),
    ):
        p, experiments = load_config(preset)
        t = resolve_run(p, experiments["untied-baseline"]).train
        assert (t.max_step, t.decay_steps, t.warmup_steps) == (*steps, p.train.warmup_steps)
    paper, experiments = load_config("paper")
    assert resolve_run(paper, experiments["baseline"]).train == paper.train


@pytest.mark.slow
def test_an_untied_experiment_trains_through_the_dag_on_its_own_indices(tmp_path):
    workdir = copy_workflow(tmp_path / "workflow")
    random_token_files(workdir / "data" / "python-docs")
    config = ["--cores", "2", "--config", "preset=tiny"]
    planned = snakemake(
        workdir, "-n", "-p", "results/runs/paper/untied-resgelu/run.json", "--cores", "1"
    )
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "indices/paper/rows105002/train.npy" in planned.stdout
    assert "--train-rows 105002" in planned.stdout

    result = snakemake(workdir, "results/runs/tiny/untied-baseline/run.json", *config)
    assert result.returncode == 0, result.stdout + result.stderr
    indices = workdir / "data" / "python-docs" / "indices" / "tiny"
    sidecar = json.loads((indices / "rows22" / "indices.json").read_text())
    assert sidecar["train_rows"] == 22 and not (indices / "indices.json").exists()
    run = workdir / "results" / "runs" / "tiny" / "untied-baseline"
    record = json.loads((run / "run.json").read_text())
    assert (record["status"], record["last_step"]) == ("completed", 21)
    assert record["identity"]["train"]["decay_steps"] == 120
    assert not record["identity"]["model"]["tie_embeddings"]
    assert pd.read_csv(run / "metrics.csv")["step"].max() == 21


def test_repro_indices_draws_the_rows_of_a_longer_schedule(token_dir, tiny_indices, tmp_path):
    from repro.cli.assembly import main

    out = tmp_path / "rows22"
    args = ["indices", "--preset", "tiny", "--data", str(token_dir), "--out", str(out)]
    assert main([*args, "--train-rows", "22"]) == 0
    assert json.loads((out / "indices.json").read_text())["train_rows"] == 22
    longer, preset_rows = (np.load(d / "train.npy") for d in (out, tiny_indices))
    assert longer.shape[0] == 22 and np.array_equal(longer[:13], preset_rows)
    assert main([*args, "--train-rows", "0"]) == 2


def test_the_caveat_calls_screen_a_screen_and_smoke_a_rehearsal():
    from repro.analysis.results import scale_caveat

    assert "a screen of the paper's claims" in scale_caveat(load_preset("screen"))
    assert "cannot test the paper" in scale_caveat(load_preset("smoke"))
    assert scale_caveat(load_preset("paper")) == ""


def cosine_to_lr_min(step, lr_max, lr_min, warmup, decay):
    """The paper's schedule written out: warm-up, half a cosine down to lr_min, then lr_min."""
    if step < warmup:
        return lr_max * (step + 1) / (warmup + 1)
    if step > decay:
        return lr_min
    return (
        lr_min
        + (lr_max - lr_min) * (1 + math.cos(math.pi * (step - warmup) / (decay - warmup))) / 2
    )


def linear_to_zero(step, lr_max, lr_min, warmup, decay):
    """Decay to zero written out: warm-up, a straight line from lr_max at the warm-up's end to
    zero at decay, then zero; lr_min plays no part."""
    if step < warmup:
        return lr_max * (step + 1) / (warmup + 1)
    return lr_max * (1 - (step - warmup) / (decay - warmup)) if step <= decay else 0.0


@pytest.mark.parametrize(
    "schedule,formula", [("cosine", cosine_to_lr_min), ("linear", linear_to_zero)]
)
def test_each_schedule_is_its_formula(schedule, formula):
    args = (6e-4, 6e-5, 2000, 60002)
    for step in [*range(0, 60100, 7), 1999, 2000, 2001, 60001, 60002, 60003, 10**6]:
        assert Schedule(*args, schedule)(step) == pytest.approx(
            formula(step, *args), rel=1e-12, abs=1e-18
        )
    assert Schedule(*args, schedule)(60002) == (6e-5 if schedule == "cosine" else 0.0)


def test_the_default_schedule_is_the_papers_and_keeps_its_identity():
    paper, experiments = load_config("paper")
    run = resolve_run(paper, experiments["baseline"])
    assert run.train.schedule == "cosine"
    recorded = run.identity()  # as a run recorded before the schedule was a setting holds it
    del recorded["train"]["schedule"]
    assert with_later_defaults(recorded) == run.identity()
    linear = replace(run, train=replace(run.train, schedule="linear"))
    assert linear.identity()["train"]["schedule"] == "linear"  # another run


def test_a_run_trained_on_the_linear_schedule_logs_it(token_dir, tiny_indices, tmp_path):
    from repro.cli.assembly import main

    preset = yaml.safe_load((REPO / "config" / "presets" / "tiny.yaml").read_text())
    preset["train"]["schedule"] = "linear"
    (tmp_path / "tiny-linear.yaml").write_text(yaml.safe_dump(preset))
    out = tmp_path / "run"
    args = ["train", "--preset", str(tmp_path / "tiny-linear.yaml"), "--experiment", "baseline"]
    assert (
        main([*args, "--data", str(token_dir), "--indices", str(tiny_indices), "--out", str(out)])
        == 0
    )
    t = preset["train"]
    lr = pd.read_csv(out / "metrics.csv")["lr"]
    expected = [
        linear_to_zero(s, 6e-4, 6e-5, t["warmup_steps"], t["decay_steps"]) for s in lr.index
    ]
    assert lr.tolist() == pytest.approx(expected, rel=1e-12, abs=1e-18) and lr.iloc[-1] == 0.0
    assert json.loads((out / "run.json").read_text())["identity"]["train"]["schedule"] == "linear"
