"""The tuning comparison (repro.annex.groups.tuning) and its claims, on runs at the tiny preset for
group `tuning` of config/experiments.yaml (table step 12, seeds 0..2), derived from the tiny run
`repro train` wrote."""

import math

import pytest

from repro.annex.claims.joint import joint_claims
from repro.annex.groups.tuning import tuning
from repro.config import load_config, seed_dir
from repro.rundir import read_record

SEEDS = 3
# The nonlinear query's best setting: 4.80, 4.82, 4.78 (resgelu-lr3e-3).
LOSSES = {
    "baseline": [5.00, 5.02, 4.98],
    "baseline-wd0.1-lr8e-4": [4.95, 4.97, 4.93],
    "baseline-wd3.125e-2-lr1.5e-3": [4.90, 4.93, 4.89],
    "baseline-wd3.125e-2-lr3e-3": [4.88, 4.90, 4.87],
    "baseline-wd0.05-lr3e-3": "diverged",
    "mlp4.75": [4.97, 4.99, 4.95],
    "mlp4.75-wd0.1-lr8e-4": [4.93, 4.94, 4.92],
    "mlp4.75-wd3.125e-2-lr1.5e-3": [4.86, 4.88, 4.85],
    "mlp4.75-wd3.125e-2-lr3e-3": [4.87, 4.89, 4.86],
    "mlp4.75-wd0.05-lr3e-3": [4.90, 4.91, 4.90],
    "resgelu-wd0.1-lr8e-4": [4.90, 4.91, 4.89],
    "resgelu-lr1.5e-3": [4.84, 4.86, 4.83],
    "resgelu-lr3e-3": [4.80, 4.82, 4.78],
    "resgelu-wd0.05-lr3e-3": [4.81, 4.83, 4.80],
}


@pytest.fixture
def fabricate(write_run):
    """Write the group's runs at seeds 0..2 ending at `losses` (derived from the tiny run
    `repro train` wrote); a setting "diverged" at step 6."""

    def write(runs_dir, losses):
        for name, values in losses.items():
            for k in range(SEEDS):
                folder = runs_dir / seed_dir("", k) / name
                if values == "diverged":
                    write_run(
                        folder,
                        name,
                        {0: 10.0, 4: 9.0},
                        last_step=6,
                        seed=k,
                        status="diverged",
                        diverged_step=6,
                    )
                elif values[k] is not None:
                    val = {0: 10.0, 4: 8.0, 8: 6.0, 12: values[k]}
                    write_run(folder, name, val, last_step=12, seed=k)
        return runs_dir

    return write


def by_claim(claims):
    tuned = claims[claims["claim"].str.startswith("beats the best-tuned")]
    return {c: (e, h, d) for c, e, h, d in tuned[["claim", "experiment", "holds", "detail"]].values}


def test_the_group_gives_the_linear_models_the_nonlinear_settings():
    _, experiments = load_config("paper")
    members = experiments.group("tuning")
    settings = {
        mode: {
            (e.optimizer.lr_max, e.optimizer.lr_min, e.optimizer.weight_decay)
            for e in members
            if (e.query_mode, e.mlp_ratio) == mode
        }
        for mode in [("residual_gelu", 4), ("linear", 4), ("linear", 4.75)]
    }
    assert len(settings[("residual_gelu", 4)]) == 4
    own = {(6e-4, 6e-5, 0.1)}  # the linear models keep their own setting besides
    assert (
        settings[("linear", 4)]
        == settings[("linear", 4.75)]
        == settings[("residual_gelu", 4)] | own
    )
    assert all(e.source for e in members if e.query_mode == "residual_gelu")  # the authors' own


def test_the_table_marks_each_models_best_and_pairs_them(tmp_path, fabricate):
    result = tuning(fabricate(tmp_path, LOSSES), "tiny", seeds=SEEDS)
    table = result.table.set_index("experiment")
    assert result.missing == []
    assert set(table.index[table["best"]]) == {
        "resgelu-lr3e-3",
        "baseline-wd3.125e-2-lr3e-3",
        "mlp4.75-wd3.125e-2-lr1.5e-3",
    }
    diverged = table.loc["baseline-wd0.05-lr3e-3"]
    assert (diverged["n_diverged"], diverged["n_seeds"], diverged["best"]) == (3, 0, False)
    best = table.loc["resgelu-lr3e-3"]
    assert best["val_loss_mean"] == pytest.approx(4.80)
    # sd of 4.80, 4.82, 4.78 is 0.02; t(0.975, 2) = 4.303
    half = 4.303 * 0.02 / math.sqrt(3)
    assert (best["val_loss_ci_low"], best["val_loss_ci_high"]) == pytest.approx(
        (4.80 - half, 4.80 + half), abs=1e-3
    )
    row = result.comparison.set_index("linear").loc["baseline-wd3.125e-2-lr3e-3"]
    assert row["nonlinear"] == "resgelu-lr3e-3" and row["n_pairs"] == 3
    # gaps 0.08, 0.08, 0.09
    assert row["loss_gap_mean"] == pytest.approx(0.25 / 3)
    assert row["rel_improvement_mean"] == pytest.approx(
        (0.08 / 4.88 + 0.08 / 4.90 + 0.09 / 4.87) / 3
    )
    assert row["rel_improvement_ci_low"] > 0
    assert result.table["caveat"].str.contains("cannot test the paper").all()


def test_the_claim_holds_where_the_best_baseline_does_not_close_the_gap(tmp_path, fabricate):
    claims = by_claim(joint_claims(fabricate(tmp_path, LOSSES), "tiny", seeds=SEEDS))
    experiment, holds, detail = claims["beats the best-tuned baseline"]
    assert (experiment, holds) == ("resgelu-lr3e-3", True)
    assert "preset tiny" in detail and "best baseline-wd3.125e-2-lr3e-3" in detail
    assert claims["beats the best-tuned larger control"][1] is True


def test_the_claim_fails_where_the_best_baseline_closes_the_gap(tmp_path, fabricate):
    closed = {**LOSSES, "baseline-wd3.125e-2-lr3e-3": [4.77, 4.79, 4.76]}
    claims = by_claim(joint_claims(fabricate(tmp_path, closed), "tiny", seeds=SEEDS))
    _, holds, detail = claims["beats the best-tuned baseline"]
    assert holds is False and "best baseline-wd3.125e-2-lr3e-3" in detail
    # the untuned baseline alone would have shown a 4% gain
    assert claims["beats the best-tuned larger control"][1] is True


def test_a_gap_within_the_seeds_spread_is_not_distinguishable(tmp_path, fabricate):
    close = {**LOSSES, "baseline-wd3.125e-2-lr3e-3": [4.85, 4.78, 4.80]}
    claims = by_claim(joint_claims(fabricate(tmp_path, close), "tiny", seeds=SEEDS))
    _, holds, detail = claims["beats the best-tuned baseline"]
    assert holds is None and detail.startswith("not distinguishable at 3 seeds")


def test_missing_runs_are_listed_instead_of_an_answer(tmp_path, fabricate):
    partial = {**LOSSES, "mlp4.75-wd0.05-lr3e-3": [4.90, None, 4.90]}
    del partial["resgelu-lr1.5e-3"]
    claims = by_claim(joint_claims(fabricate(tmp_path, partial), "tiny", seeds=SEEDS))
    experiment, holds, detail = claims["beats the best-tuned baseline"]
    assert (experiment, holds) == ("tuning", None)
    assert detail.startswith("not answered at preset tiny, group tuning, 3 seeds: 4 runs missing")
    for run in (
        "resgelu-lr1.5e-3",
        "seed1/resgelu-lr1.5e-3",
        "seed2/resgelu-lr1.5e-3",
        "seed1/mlp4.75-wd0.05-lr3e-3",
    ):
        assert run in detail


@pytest.mark.slow  # papermill runs the notebook in its own kernel
def test_the_notebook_writes_both_tables(tmp_path, fabricate):
    import pandas as pd
    from conftest import run_checkout_notebook

    runs = fabricate(tmp_path / "runs" / "tiny", LOSSES)
    out = {
        "out_csv": tmp_path / "tuning.csv",
        "out_html": tmp_path / "tuning.html",
        "out_comparison": tmp_path / "comparison.csv",
    }
    run_checkout_notebook("tuning", tmp_path, runs_dir=runs, seeds=SEEDS, **out)
    table, comparison = (pd.read_csv(out[k]) for k in ("out_csv", "out_comparison"))
    assert len(table) == 14 and table["best"].sum() == 3
    assert "mlp4.75-wd0.05-lr3e-3" in out["out_html"].read_text()  # the report's table
    assert list(comparison["linear"]) == [
        "baseline-wd3.125e-2-lr3e-3",
        "mlp4.75-wd3.125e-2-lr1.5e-3",
    ]


def test_runs_that_are_not_their_settings_are_left_out_and_named(tmp_path, fabricate, write_run):
    """A folder holding another setting's run.json, and a run trained before its setting's
    learning rate was edited: neither is read as the setting its folder names."""
    runs = fabricate(tmp_path, LOSSES)
    other = runs / "resgelu-lr3e-3"
    write_run(other, "resgelu-lr1.5e-3", {0: 10.0, 4: 8.0, 8: 6.0, 12: 4.5}, last_step=12)
    edited = runs / "seed1" / "baseline"
    record = read_record(edited)
    record.identity["optimizer"]["lr_max"] = 9e-4  # as the run recorded it; the file says 6e-4
    record.write(edited)
    result = tuning(runs, "tiny", seeds=SEEDS)
    table = result.table.set_index("experiment")
    assert (
        "seed0: experiment: 'resgelu-lr1.5e-3' -> 'resgelu-lr3e-3'"
        in (table.at["resgelu-lr3e-3", "config_differences"])
    )
    assert "seed1: optimizer.lr_max: 0.0009 -> 0.0006" in table.at["baseline", "config_differences"]
    assert table.at["resgelu-lr3e-3", "n_seeds"] == SEEDS - 1
    assert {"resgelu-lr3e-3", "seed1/baseline"} <= set(result.missing)
    assert table.at["mlp4.75", "config_differences"] == ""
