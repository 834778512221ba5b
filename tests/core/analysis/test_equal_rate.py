"""At the small presets (report.equal_rate) Table 1 and the claims set the nonlinear query beside
the linear query at its own learning rate: there the rate alone can make the gap over the
baseline (at 6e-4). The paper preset's Table 1 is the paper's."""

import pandas as pd

from repro.analysis import results
from repro.analysis.claims import check_claims

LINEAR = "baseline-wd3.125e-2-lr3e-3"  # the linear query at resgelu-lr3e-3's rates and decay
CLAIM = f"beats the linear query at its learning rate ({LINEAR})"


def claim(claims: pd.DataFrame, experiment: str) -> pd.Series:
    rows = claims[(claims["claim"] == CLAIM) & (claims["experiment"] == experiment)]
    assert len(rows) == 1, claims[["claim", "experiment"]]
    return rows.iloc[0]


def test_the_small_table_and_claims_show_the_gap_at_equal_learning_rate(tiny_runs, write_run):
    # resgelu-lr3e-3 ends at 4.93: 1.40% ahead of the baseline (5.0), 0.20% of the linear query
    write_run(tiny_runs / LINEAR, LINEAR, {0: 10.0, 4: 7.7, 8: 5.9, 12: 4.94}, last_step=12)
    table = results.table1(tiny_runs, "tiny").set_index("experiment")
    assert table.index[-1] == LINEAR and table.at[LINEAR, "lr_max"] == 3e-3
    assert table.at[LINEAR, "status"] == "completed"
    caveat = table.at[LINEAR, "caveat"]
    assert "cannot test the paper" in caveat
    assert (
        "resgelu-lr3e-3 is 1.40% ahead of the baseline, 0.20% ahead of "
        f"{LINEAR} (the linear query at its learning rate, 0.003): the difference between "
        "the two gaps is the learning rate's, not the query's" in caveat
    )
    claims = check_claims(tiny_runs, "tiny")
    row = claim(claims, "resgelu-lr3e-3")
    assert row["holds"] is True and "4.9300 vs baseline-wd3.125e-2-lr3e-3 4.9400" in row["detail"]
    assert (claims["experiment"] == "resgelu-lr2.6e-3").any()  # no linear query at 2.6e-3:
    assert not ((claims["claim"] == CLAIM) & (claims["experiment"] == "resgelu-lr2.6e-3")).any()
    assert "learning rate" in claims["caveat"].iloc[0]


def test_without_the_linear_run_the_claim_names_it(tiny_runs):
    row = claim(check_claims(tiny_runs, "tiny"), "resgelu-lr3e-3")
    assert row["holds"] is None and row["detail"].startswith(f"{LINEAR} run missing")
    table = results.table1(tiny_runs, "tiny").set_index("experiment")
    assert table.at[LINEAR, "status"] == "missing"
    assert "the learning rate's" not in table.at[LINEAR, "caveat"]


def test_the_paper_presets_table_is_the_papers(tmp_path):
    table = results.table1(tmp_path, "paper")
    assert list(table["experiment"]) == [
        "baseline",
        "mlp4.75",
        "mlp4.75-scaled",
        "resgelu-lr2.6e-3",
        "resgelu-lr3e-3",
    ]
    assert set(table["caveat"]) == {""}


def test_the_smoke_run_trains_the_linear_query_at_the_nonlinear_rate(default_plan):
    assert f"results/runs/smoke/{LINEAR}/metrics.csv" in default_plan.stdout


def test_figure1_draws_the_linear_query_at_the_nonlinear_querys_rate(tiny_runs, write_run):
    """Table 1's sixth row is in the figure too: the gap over the baseline that it shows is
    the learning rate's as much as the query's."""
    from repro.analysis import plots

    write_run(tiny_runs / LINEAR, LINEAR, {0: 10.0, 4: 7.7, 8: 5.9, 12: 4.94}, last_step=12)
    fig = plots.figure1(tiny_runs, "tiny")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert LINEAR in labels, labels
    drawn = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert len({drawn[name].get_color() for name in drawn if not name.startswith("_")}) == 6


def test_figure1_asked_for_alone_trains_the_linear_query_at_that_rate(tmp_path):
    from workflow_helpers import copy_workflow, snakemake_in_process

    workdir = copy_workflow(tmp_path / "workflow")
    plan = snakemake_in_process(workdir, "-n", "--cores", "1", "results/figures/figure1.png")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert f"results/runs/smoke/{LINEAR}/metrics.csv" in plan.stdout
