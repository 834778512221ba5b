"""Decay to zero (repro.annex.groups.decay): group `decay_to_zero` of config/experiments.yaml, its
table read at each run's last evaluation and its claim, on runs written as `repro train` records
them at a tiny preset whose table step (8) comes before its last evaluation (12)."""

from dataclasses import replace

import pytest
from conftest import edited_tiny_preset
from workflow_helpers import assert_group_planned

from repro.annex.claims.joint import joint_claims
from repro.annex.groups.decay import CLAIM, GROUP, decay_to_zero
from repro.config import load_config, load_run, seed_dir

SEEDS = 3
LOSSES = {  # at the last evaluation; the nonlinear query's best is its own rate, 3e-3
    "d2z-baseline-lr4.8e-3": [4.90, 4.92, 4.89],
    "d2z-baseline-lr2.4e-3": [4.93, 4.95, 4.92],
    "d2z-resgelu-lr3e-3": [4.84, 4.87, 4.83],
    "d2z-resgelu-lr4.8e-3": [4.86, 4.88, 4.86],
    "d2z-cos-baseline-lr4.8e-3": [4.91, 4.93, 4.90],
    "d2z-cos-baseline-lr2.4e-3": [4.94, 4.96, 4.93],
    "d2z-cos-resgelu-lr3e-3": [4.85, 4.88, 4.84],
    "d2z-cos-resgelu-lr4.8e-3": [4.87, 4.89, 4.87],
}


@pytest.fixture
def preset(tmp_path):
    """tiny, with its table step before the end of the decay."""
    return edited_tiny_preset(tmp_path, "tiny-early.yaml", report={"table_step": 8})


@pytest.fixture
def fabricate(write_run):
    """Each run evaluated at 0, 4, 8 and, unless its loss is None, 12 (then its last step is 8)."""

    def write(runs_dir, preset, losses=LOSSES):
        for name, values in losses.items():
            for k, loss in enumerate(values):
                val = {0: 10.0, 4: 8.0, 8: 6.0} | ({} if loss is None else {12: loss})
                folder = runs_dir / seed_dir("", k) / name
                write_run(folder, name, val, last_step=max(val), preset=preset, seed=k)
        return runs_dir

    return write


def the_claim(runs_dir, preset):
    claims = joint_claims(runs_dir, preset, seeds=SEEDS).set_index("claim")
    return tuple(claims.loc[CLAIM, ["experiment", "holds", "detail"]])


def test_the_group_decays_both_queries_to_zero_at_the_audits_rates_on_both_schedules():
    """Linearly to zero, as the audit's configurations ask, and by cosine to zero, as its training
    scripts (which never read their `lr_schedule`) trained its logs."""
    paper, experiments = load_config("paper")
    runs = {e.name: load_run("paper", e.name) for e in experiments.group(GROUP)}
    for schedule in ("linear", "cosine"):
        rates = {
            mode: sorted(
                r.optimizer.lr_max
                for r in runs.values()
                if r.model.query_mode == mode and r.train.schedule == schedule
            )
            for mode in ("linear", "residual_gelu")
        }
        assert rates == {"linear": [2.4e-3, 4.8e-3], "residual_gelu": [3e-3, 4.8e-3]}, schedule
    for run in runs.values():
        assert run.optimizer.lr_min == 0 and run.train.decay_steps == run.train.max_step
        wd = 0.1 if run.model.query_mode == "linear" else 2**-5  # the audit's; Table 1's
        assert run.optimizer.weight_decay == wd
    assert runs["d2z-baseline-lr4.8e-3"].identity()["train"]["schedule"] == "linear"
    assert runs["d2z-cos-baseline-lr4.8e-3"].train.schedule == "cosine"  # the preset's


def test_a_schedule_written_with_a_reference_length_keeps_its_kind():
    """An experiment may decay to zero on a schedule scaled to the preset (reference_max_step)."""
    _, experiments = load_config("tiny")
    e = replace(
        experiments["d2z-baseline-lr4.8e-3"],
        train={"schedule": "linear", "max_step": 120, "decay_steps": 120, "reference_max_step": 60},
    )
    assert e.schedule(12) == {"schedule": "linear", "max_step": 24, "decay_steps": 24}


def test_the_table_reads_each_run_at_its_last_evaluation(tmp_path, preset, fabricate):
    result = decay_to_zero(fabricate(tmp_path / "runs", preset), preset, SEEDS)
    table = result.table.set_index("experiment")
    assert result.missing == [] and (table["step"] == 12).all() and len(table) == 8
    assert table.loc["d2z-baseline-lr4.8e-3", "val_loss_mean"] == pytest.approx(4.90333, abs=1e-4)
    assert set(table.index[table["best"]]) == {"d2z-baseline-lr4.8e-3", "d2z-resgelu-lr3e-3"}
    (row,) = result.comparison.to_dict("records")
    assert (row["nonlinear"], row["linear"], row["step"]) == (
        "d2z-resgelu-lr3e-3",
        "d2z-baseline-lr4.8e-3",
        12,
    )
    assert row["n_pairs"] == 3 and row["loss_gap_mean"] == pytest.approx(0.17 / 3)


def test_the_claim_is_answered_with_its_interval(tmp_path, preset, fabricate):
    experiment, holds, detail = the_claim(fabricate(tmp_path / "runs", preset), preset)
    assert (experiment, holds) == ("d2z-resgelu-lr3e-3", True)
    assert "step 12" in detail and "best d2z-baseline-lr4.8e-3" in detail and "95% CI" in detail
    level = {**LOSSES, "d2z-baseline-lr4.8e-3": [4.83, 4.88, 4.84]}
    _, holds, detail = the_claim(fabricate(tmp_path / "level", preset, level), preset)
    assert holds is None and detail.startswith("not distinguishable at 3 seeds")


def test_a_run_stopped_before_its_last_evaluation_is_named_missing(tmp_path, preset, fabricate):
    """Read at the table step it would have a loss; read where its decay ends it has none."""
    stopped = {**LOSSES, "d2z-resgelu-lr4.8e-3": [4.86, None, 4.86]}
    experiment, holds, detail = the_claim(fabricate(tmp_path / "runs", preset, stopped), preset)
    assert (experiment, holds) == (GROUP, None)
    assert "1 runs missing: seed1/d2z-resgelu-lr4.8e-3" in detail


def test_each_model_is_represented_by_its_best_rate_on_either_schedule(tmp_path, preset, fabricate):
    cosine_best = {**LOSSES, "d2z-cos-baseline-lr4.8e-3": [4.88, 4.90, 4.87]}
    result = decay_to_zero(fabricate(tmp_path / "runs", preset, cosine_best), preset, SEEDS)
    (row,) = result.comparison.to_dict("records")
    assert (row["nonlinear"], row["linear"]) == ("d2z-resgelu-lr3e-3", "d2z-cos-baseline-lr4.8e-3")


@pytest.mark.parametrize("preset_name,hours", [("paper", "141.6"), ("screen", "14.2")])
def test_describe_gives_the_groups_gpu_hours(capsys, preset_name, hours):
    from repro.cli.assembly import main

    assert main(["describe", "--preset", preset_name, "--group", GROUP]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"{GROUP}: 8 runs, {hours} GPU-hours")


def test_the_workflow_plans_the_group_and_its_table(group_plans):
    runs = ("d2z-baseline-lr4.8e-3", "seed1/d2z-resgelu-lr4.8e-3")
    assert_group_planned(group_plans("screen"), "decay_to_zero", "screen", runs)


@pytest.mark.slow  # papermill runs the notebook in its own kernel
def test_the_notebook_writes_both_tables(tmp_path, write_run):
    import pandas as pd
    from conftest import run_checkout_notebook

    runs = tmp_path / "runs" / "tiny"
    for name, values in LOSSES.items():
        for k, loss in enumerate(values):
            folder = runs / seed_dir("", k) / name
            write_run(folder, name, {0: 10.0, 12: loss}, last_step=12, seed=k)
    out = {
        "out_csv": tmp_path / "d2z.csv",
        "out_html": tmp_path / "d2z.html",
        "out_comparison": tmp_path / "comparison.csv",
        "out_figure": tmp_path / "d2z.png",
        "out_figure_html": tmp_path / "d2z-figure.html",
    }
    run_checkout_notebook("decay_to_zero", tmp_path, runs_dir=runs, seeds=SEEDS, **out)
    table, comparison = (pd.read_csv(out[k]) for k in ("out_csv", "out_comparison"))
    assert len(table) == 8 and (table["step"] == 12).all()
    assert list(comparison["nonlinear"]) == ["d2z-resgelu-lr3e-3"]
    assert "d2z-baseline-lr2.4e-3" in out["out_html"].read_text()
    assert out["out_figure"].read_bytes().startswith(b"\x89PNG")  # every setting, its interval
    assert "<img" in out["out_figure_html"].read_text()
