"""Version 3's recipe (repro.annex.groups.v3): group `v3` of config/experiments.yaml, its table with
parameter counts read at each run's last evaluation, and its claims, on runs written as
`repro train` records them at the tiny preset (last evaluation: step 12)."""

import pytest
from workflow_helpers import assert_group_planned

from repro.annex.claims.joint import joint_claims
from repro.annex.groups.v3 import CLAIM_NAMES, D2Z_CLAIM, GROUP, PARAMETERS_CLAIM, version3
from repro.config import load_config, load_run, seed_dir

SEEDS = 3
LOSSES = {  # at step 12; the nonlinear query's best is version 3's 3.6e-3
    "baseline": [4.95, 4.97, 4.96],
    "v3-baseline-wd0.1-lr3.6e-3": [4.90, 4.93, 4.91],
    "v3-baseline-wd0.1-lr2.4e-3": [4.92, 4.94, 4.92],
    "v3-baseline-wd0.1-lr1.2e-3": [4.94, 4.95, 4.94],
    "mlp4.75": [4.91, 4.93, 4.92],
    "mlp4.75-scaled": [4.92, 4.93, 4.93],
    "v3-resgelu-wd0.1-lr3.6e-3": [4.80, 4.83, 4.81],
    "v3-resgelu-wd0.1-lr3.8e-3": [4.82, 4.84, 4.82],
    "v3-resgelu-wd0.1-lr4e-3": [4.83, 4.85, 4.84],
    "resgelu-wd0.05-lr2.4e-3": [4.85, 4.86, 4.85],
    "v3-identity-wd0.1-lr1.4e-3": [4.97, 4.98, 4.97],
    "v3-identity-wd0.1-lr1.6e-3": [4.96, 4.98, 4.97],
    "v3-identity-mlp4.5-wd0.1-lr1.8e-3": [4.94, 4.95, 4.95],
    "v3-identity-mlp4.5-wd0.1-lr2e-3": [4.93, 4.95, 4.94],
    "v3-identity-mlp4.5-wd0.1-lr2.2e-3": [4.93, 4.96, 4.94],
}
DECAY_TO_ZERO = {  # the linear runs of group decay_to_zero, on both schedules
    "d2z-baseline-lr4.8e-3": [4.86, 4.88, 4.86],
    "d2z-baseline-lr2.4e-3": [4.89, 4.90, 4.88],
    "d2z-cos-baseline-lr4.8e-3": [4.87, 4.89, 4.87],
    "d2z-cos-baseline-lr2.4e-3": [4.90, 4.91, 4.89],
}


@pytest.fixture
def fabricate(write_run):
    """Each run evaluated at 0, 4, 8 and, unless its loss is None, 12."""

    def write(runs_dir, losses):
        for name, values in losses.items():
            for k, loss in enumerate(values):
                val = {0: 10.0, 4: 8.0, 8: 6.0} | ({} if loss is None else {12: loss})
                folder = runs_dir / seed_dir("", k) / name
                write_run(folder, name, val, last_step=max(val), seed=k)
        return runs_dir

    return write


def claims_of(runs_dir) -> dict:
    claims = joint_claims(runs_dir, "tiny", seeds=SEEDS).set_index("claim")
    return {c: tuple(claims.loc[c, ["experiment", "holds", "detail"]]) for c in CLAIM_NAMES}


def test_the_group_holds_the_authors_later_arms_and_the_linear_query_on_their_recipe():
    _, experiments = load_config("paper")
    members = experiments.group(GROUP)
    assert {load_run("paper", e.name).train.schedule for e in members} == {"cosine"}
    arms = {
        (e.query_mode, e.mlp_ratio, e.optimizer.lr_max, e.optimizer.lr_min)
        for e in members
        if e.optimizer.weight_decay == 0.1
    }
    for rate, floor in ((3.6e-3, 2e-5), (3.8e-3, 2e-5), (4e-3, 1e-5)):
        assert ("residual_gelu", 4, rate, floor) in arms
    for rate in (1.4e-3, 1.6e-3):
        assert ("identity", 4, rate, 2e-5) in arms
    for rate in (1.8e-3, 2e-3, 2.2e-3):
        assert ("identity", 4.5, rate, 2e-5) in arms
    for rate in (3.6e-3, 2.4e-3, 1.2e-3):  # the same recipe, and lower rates
        assert ("linear", 4, rate, 2e-5) in arms
    assert ("linear", 4, 6e-4, 6e-5) in arms  # the baseline
    assert {"mlp4.75", "mlp4.75-scaled", "resgelu-wd0.05-lr2.4e-3"} <= {e.name for e in members}


def test_the_table_reads_step_60000_at_paper_and_counts_parameters(tmp_path):
    result = version3(tmp_path, "paper", 1)
    table = result.table.set_index("experiment")
    assert result.step == 60000 and (table["step"] == 60000).all()
    params = table["non_embedding_params"]
    assert params["mlp4.75"] == 95_570_688 and params["baseline"] == 84_953_856
    assert table.loc["mlp4.75", "extra_params"] == pytest.approx(0.125, abs=1e-3)
    # W_Q removed, its parameters moved to the MLP: the baseline's count again
    assert params["v3-identity-mlp4.5-wd0.1-lr2e-3"] == params["baseline"]
    assert params["v3-identity-wd0.1-lr1.4e-3"] < params["baseline"]


def test_the_table_marks_each_models_best(tmp_path, fabricate):
    result = version3(fabricate(tmp_path / "runs", LOSSES), "tiny", SEEDS)
    table = result.table.set_index("experiment")
    assert result.missing == [] and (table["step"] == 12).all()
    assert set(table.index[table["best"]]) == {
        "v3-baseline-wd0.1-lr3.6e-3",
        "mlp4.75",
        "v3-resgelu-wd0.1-lr3.6e-3",
        "v3-identity-wd0.1-lr1.6e-3",
        "v3-identity-mlp4.5-wd0.1-lr2e-3",
    }


def test_the_claims_are_answered_with_their_intervals(tmp_path, fabricate):
    runs = fabricate(tmp_path / "runs", LOSSES | DECAY_TO_ZERO)
    claims = claims_of(runs)
    for claim in ("version 3: beats the linear baseline", D2Z_CLAIM):
        experiment, holds, detail = claims[claim]
        assert (experiment, holds) == ("v3-resgelu-wd0.1-lr3.6e-3", True), detail
        assert "95% CI" in detail and "step 12" in detail
    _, holds, detail = claims["version 3: beats the linear query on the same recipe"]
    assert holds is True and "best v3-baseline-wd0.1-lr3.6e-3" in detail
    assert "best d2z-baseline-lr4.8e-3" in claims[D2Z_CLAIM][2]
    # ahead of the 12.5% control (12.4% at tiny's width): more than 30% is not testable here
    _, holds, detail = claims[PARAMETERS_CLAIM]
    assert holds is None and detail.startswith("not testable")
    assert "the widest control, mlp4.75, has 12.4% more" in detail


def test_behind_the_wider_control_the_parameters_claim_fails(tmp_path, fabricate):
    behind = LOSSES | {"mlp4.75": [4.70, 4.72, 4.71]}
    _, holds, detail = claims_of(fabricate(tmp_path / "runs", behind | DECAY_TO_ZERO))[
        PARAMETERS_CLAIM
    ]
    assert holds is False and "best mlp4.75" in detail


def test_the_linear_query_on_the_same_recipe_can_close_the_gap(tmp_path, fabricate):
    level = LOSSES | {"v3-baseline-wd0.1-lr3.6e-3": [4.80, 4.84, 4.80]}
    claims = claims_of(fabricate(tmp_path / "runs", level | DECAY_TO_ZERO))
    _, holds, detail = claims["version 3: beats the linear query on the same recipe"]
    assert holds is None and detail.startswith("not distinguishable at 3 seeds")
    assert claims["version 3: beats the linear baseline"][1] is True


def test_a_missing_run_is_named_and_answers_nothing(tmp_path, fabricate):
    stopped = LOSSES | {"v3-baseline-wd0.1-lr3.6e-3": [4.90, None, 4.91]}
    claims = claims_of(fabricate(tmp_path / "runs", stopped | DECAY_TO_ZERO))
    for claim in CLAIM_NAMES:
        experiment, holds, detail = claims[claim]
        assert (experiment, holds) == (GROUP, None)
        assert "1 runs missing: seed1/v3-baseline-wd0.1-lr3.6e-3" in detail
    # without the decay-to-zero runs, only that claim waits for them
    claims = claims_of(fabricate(tmp_path / "alone", LOSSES))
    assert claims[D2Z_CLAIM][1] is None
    assert "12 runs missing: d2z-baseline-lr4.8e-3," in claims[D2Z_CLAIM][2]
    assert claims["version 3: beats the linear baseline"][1] is True


@pytest.mark.parametrize("preset_name,hours", [("paper", "266.4"), ("screen", "26.6")])
def test_describe_gives_the_groups_gpu_hours(capsys, preset_name, hours):
    from repro.cli.assembly import main

    assert main(["describe", "--preset", preset_name, "--group", GROUP]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"{GROUP}: 15 runs, {hours} GPU-hours")


def test_the_workflow_plans_the_group_and_its_table(group_plans):
    runs = ("v3-baseline-wd0.1-lr3.6e-3", "seed1/v3-identity-mlp4.5-wd0.1-lr2.2e-3")
    assert_group_planned(group_plans("screen"), "v3", "screen", runs)


@pytest.mark.slow  # papermill runs the notebook in its own kernel
def test_the_notebook_writes_the_table_and_the_claims(tmp_path, fabricate):
    import pandas as pd
    from conftest import run_checkout_notebook

    runs = fabricate(tmp_path / "runs" / "tiny", LOSSES | DECAY_TO_ZERO)
    out = {
        "out_csv": tmp_path / "v3.csv",
        "out_html": tmp_path / "v3.html",
        "out_claims": tmp_path / "claims.csv",
        "out_figure": tmp_path / "v3.png",
        "out_figure_html": tmp_path / "v3-figure.html",
    }
    run_checkout_notebook("v3", tmp_path, runs_dir=runs, seeds=SEEDS, **out)
    table, claims = (pd.read_csv(out[k]) for k in ("out_csv", "out_claims"))
    assert len(table) == len(LOSSES) and (table["step"] == 12).all()
    assert list(claims["claim"]) == CLAIM_NAMES
    assert "v3-baseline-wd0.1-lr3.6e-3" in out["out_html"].read_text()
    assert out["out_figure"].read_bytes().startswith(b"\x89PNG")  # every arm, with its interval
    assert (tmp_path / "v3.pdf").exists() and "<img" in out["out_figure_html"].read_text()


def test_the_figure_draws_a_point_per_seed_below_three_seeds(tmp_path, fabricate):
    from repro.annex.groups.final_losses import final_losses

    two = {name: losses[:2] for name, losses in LOSSES.items()}
    result = version3(fabricate(tmp_path / "runs", two), "tiny", 2)
    ax = final_losses(result.table, result.losses, "v3").axes[0]
    points = [line.get_xdata() for line in ax.lines if len(line.get_xdata())]
    assert len(points) == len(LOSSES) and all(len(p) == 2 for p in points)  # no interval
    assert list(points[0]) == LOSSES["baseline"][:2]
