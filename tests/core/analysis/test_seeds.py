"""Seeds: the derivation of a seed's seeds, its paths, and the intervals over seeds, checked
against hand computations."""

import json
import math

import pandas as pd
import pytest
from conftest import write_experiments

from repro.analysis import seeds
from repro.analysis.claims import check_claims
from repro.config import load_preset, load_run, seed_dir
from repro.config.schema import ConfigError

# t(0.975, df) from a printed t table (df = 1, 2, 3)
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182}


def test_seed_k_shifts_both_seeds_and_seed_0_is_the_papers():
    paper = load_preset("paper")
    assert paper.with_seed(0) == paper and (paper.train.index_seed, paper.train.init_seed) == (
        42,
        1337,
    )
    third = paper.with_seed(2)
    assert (third.train.index_seed, third.train.init_seed, third.seed) == (44, 1339, 2)
    assert third.with_seed(1).train == paper.with_seed(1).train  # seeds are absolute
    base, other = load_run("tiny", "baseline"), load_run("tiny", "baseline", seed=1)
    assert base.identity() == load_run("tiny", "baseline").identity()
    assert base.identity()["train"]["init_seed"] != other.identity()["train"]["init_seed"]
    assert other.seed == 1
    with pytest.raises(ConfigError, match="seed -1"):
        paper.with_seed(-1)


def test_seed_0_keeps_its_paths():
    assert seed_dir("results/runs/tiny", 0) == "results/runs/tiny"
    assert seed_dir("results/runs/tiny", 2) == "results/runs/tiny/seed2"


def test_interval_by_hand():
    values = pd.DataFrame({"g": ["a"] * 4 + ["b"], "x": [1.0, 2.0, 3.0, 4.0, 7.0]})
    out = seeds.summarise(values.groupby("g"), "x")
    sd = math.sqrt(((1.5**2 + 0.5**2) * 2) / 3)  # sample sd of 1..4: 1.29099
    half = T_TABLE[3] * sd / math.sqrt(4)  # 2.0543
    a = out.loc["a"]
    assert (a["n_seeds"], a["x_mean"]) == (4, 2.5)
    assert a["x_sd"] == pytest.approx(sd)
    assert (a["x_ci_low"], a["x_ci_high"]) == pytest.approx((2.5 - half, 2.5 + half), abs=1e-3)
    b = out.loc["b"]  # one value: a mean, no interval
    assert b["n_seeds"] == 1 and b["x_mean"] == 7.0 and math.isnan(b["x_ci_low"])


GAINS = {  # experiment: per-seed val loss at the table step (12); baseline 5.0, 5.2, 4.9
    "baseline": [5.0, 5.2, 4.9],
    "mlp4.75": [4.96, 5.21, 4.85],
    "mlp4.75-scaled": [4.97, 5.15, None],  # seed 2 missing
    "resgelu-lr2.6e-3": [4.94, 5.13, 4.85],
    "resgelu-lr3e-3": [4.93, 5.12, 4.84],
}


@pytest.fixture
def seed_runs(tmp_path, write_run):
    """Table 1 runs of tiny at seeds 0, 1, 2 under runs/tiny, runs/tiny/seed1, runs/tiny/seed2."""
    runs = tmp_path / "runs" / "tiny"
    for name, losses in GAINS.items():
        for k, loss in enumerate(losses):
            if loss is not None:
                gain = GAINS["baseline"][k] - loss
                write_run(
                    runs / seed_dir("", k) / name,
                    name,
                    {0: 10.0, 4: 8.0 - gain, 8: 6.0 - gain, 12: loss},
                    last_step=12,
                    seed=k,
                )
    return runs


def test_table1_seeds_by_hand(seed_runs):
    table = seeds.table1_seeds(seed_runs, "tiny", 3).set_index("experiment")
    assert list(table.index) == [*GAINS, "baseline-wd3.125e-2-lr3e-3"]  # report.equal_rate
    assert table.at["baseline-wd3.125e-2-lr3e-3", "n_seeds"] == 0  # not trained here
    row = table.loc["resgelu-lr3e-3"]
    losses = [4.93, 5.12, 4.84]
    mean = sum(losses) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in losses) / 2)
    assert (row["n_seeds"], row["seeds"], row["step"]) == (3, 3, 12)
    assert row["val_loss_mean"] == pytest.approx(mean)
    assert row["val_loss_ci_high"] == pytest.approx(mean + T_TABLE[2] * sd / math.sqrt(3), abs=1e-3)
    gains = [(b - v) / b for b, v in zip(GAINS["baseline"], losses)]  # paired, seed by seed
    g_mean = sum(gains) / 3
    g_sd = math.sqrt(sum((g - g_mean) ** 2 for g in gains) / 2)
    assert row["rel_improvement_mean"] == pytest.approx(g_mean)
    assert row["rel_improvement_ci_low"] == pytest.approx(
        g_mean - T_TABLE[2] * g_sd / math.sqrt(3), rel=1e-3
    )
    assert row["paper_val_loss"] == 2.915 and row["preset"] == "tiny"
    # two seeds of mlp4.75-scaled: two pairs, t with one degree of freedom
    scaled = table.loc["mlp4.75-scaled"]
    gains = [(5.0 - 4.97) / 5.0, (5.2 - 5.15) / 5.2]
    half = T_TABLE[1] * abs(gains[0] - gains[1]) / math.sqrt(2) / math.sqrt(2)
    assert (scaled["n_seeds"], scaled["n_pairs"]) == (2, 2)
    assert scaled["rel_improvement_ci_high"] == pytest.approx(sum(gains) / 2 + half, rel=1e-3)
    assert table.loc["baseline", "rel_improvement_ci_low"] == 0.0


def test_claims_use_the_paired_intervals(seed_runs):
    claims = check_claims(seed_runs, "tiny", seeds=3).set_index(["claim", "experiment"])
    beats = claims.loc[("beats baseline at every evaluation", "resgelu-lr3e-3")]
    # gains at step 4 (0.07, 0.08, 0.06) and 12 are all above zero, by intervals that exclude it
    assert beats["holds"] is True, beats["detail"]
    control = claims.loc[("beats mlp4.75", "resgelu-lr2.6e-3")]
    # 4.94 vs 4.96, 5.13 vs 5.21, 4.85 vs 4.85: ahead at 3 seeds, but the interval spans zero
    assert control["holds"] is None
    assert control["detail"].startswith("not distinguishable at 3 seeds"), control["detail"]
    one = check_claims(seed_runs, "tiny").set_index(["claim", "experiment"])  # seed 0 only
    assert one.loc[("beats mlp4.75", "resgelu-lr2.6e-3"), "holds"] is True


def test_figure1_draws_means_and_bands(seed_runs):
    from repro.analysis import plots

    fig = plots.figure1(seed_runs, "tiny", seeds=3)
    top, bottom = fig.axes
    assert len(top.collections) == 5 and len(bottom.collections) == 4  # a band per val curve
    ours = next(line for line in top.lines if line.get_label() == "resgelu-lr3e-3")
    assert ours.get_ydata()[-1] == pytest.approx((4.93 + 5.12 + 4.84) / 3)
    assert "mean of 3 seeds" in top.get_title()
    one = plots.figure1(seed_runs, "tiny").axes[0]  # seed 0 alone: its own curve, no band
    ours = next(line for line in one.lines if line.get_label() == "resgelu-lr3e-3")
    assert ours.get_ydata()[-1] == 4.93 and "seeds" not in one.get_title()


def test_figure1_at_two_seeds_draws_their_range_not_a_t_interval(seed_runs):
    from repro.analysis import plots

    top = plots.figure1(seed_runs, "tiny", seeds=2).axes[0]
    assert "mean of 2 seeds, bands: min to max over the seeds" in top.get_title()
    at_12 = [
        sorted({round(y, 6) for x, y in band.get_paths()[0].vertices if x == 12})
        for band in top.collections
    ]
    assert [4.93, 5.12] in at_12  # resgelu-lr3e-3's two seeds (a t-interval: 1.2 either side)
    assert [5.0, 5.2] in at_12  # the baseline's


def test_cli_seed_draws_and_trains_its_own(token_dir, tmp_path, capsys):
    from repro.cli.assembly import main

    data = ["--data", str(token_dir)]
    for k in (0, 1):
        out = str(tmp_path / f"ix{k}")
        assert main(["indices", "--preset", "tiny", *data, "--out", out, "--seed", str(k)]) == 0
        assert json.loads((tmp_path / f"ix{k}" / "indices.json").read_text())["seed"] == 42 + k
    train = ["train", "--preset", "tiny", "--experiment", "identity", *data]
    run = ["--out", str(tmp_path / "run")]
    # seed 1 refuses seed 0's indices, and the seed-0 run directory refuses seed 1
    assert main([*train, "--indices", str(tmp_path / "ix0"), *run, "--seed", "1"]) == 2
    assert "seed is 42, experiment identity at preset tiny needs 43" in capsys.readouterr().err
    assert main([*train, "--indices", str(tmp_path / "ix1"), *run, "--seed", "1"]) == 0
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["identity"]["train"]["init_seed"] == 1338
    assert main([*train, "--indices", str(tmp_path / "ix0"), *run]) == 2
    assert "another configuration" in capsys.readouterr().err


def test_describe_states_the_cost_of_n_seeds(capsys):
    from repro.cli.assembly import main

    group = ["describe", "--preset", "paper", "--group", "table1", "--tokens-per-s", "491520"]
    assert main([*group, "--seeds", "3"]) == 0
    assert "table1: 5 runs x 3 seeds, 250.0 GPU-hours at measured" in capsys.readouterr().out
    assert main([*group[:3], "--experiment", "baseline", "--json", "--seeds", "2"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["gpu_hours_all_seeds"] == pytest.approx(2 * row["gpu_hours"])
    assert main([*group, "--seeds", "0"]) == 2


def test_an_experiment_cannot_be_named_like_a_seed_folder(tmp_path):
    from repro.config import load_experiments

    path = write_experiments(tmp_path / "experiments.yaml", "seed1")
    with pytest.raises(ConfigError, match="seed1"):
        load_experiments(path)


def test_a_folder_holding_another_experiments_run_is_left_out_and_named(seed_runs, write_run):
    write_run(
        seed_runs / "seed2" / "mlp4.75",
        "mlp4.75-scaled",
        {0: 10.0, 4: 7.0, 8: 5.0, 12: 4.0},
        last_step=12,
        seed=2,
    )
    table = seeds.table1_seeds(seed_runs, "tiny", 3).set_index("experiment")
    assert table.at["mlp4.75", "n_seeds"] == 2
    assert table.at["mlp4.75", "config_differences"].startswith(
        "seed2: experiment: 'mlp4.75-scaled' -> 'mlp4.75'"
    )
    assert table.at["baseline", "config_differences"] == ""


def test_holm_by_hand():
    # m = 3 tested: 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1 = 0.04, raised to the 0.06 before it
    corrected = seeds.holm([0.04, 0.01, float("nan"), 0.03])
    assert corrected[[0, 1, 3]] == pytest.approx([0.06, 0.03, 0.06])
    assert math.isnan(corrected[2])
    assert seeds.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert len(seeds.holm([])) == 0


def test_the_p_value_is_the_paired_t_tests_and_agrees_with_the_interval():
    from scipy import stats

    gains = [0.012, 0.015, 0.004]
    mean, sd = sum(gains) / 3, pd.Series(gains).std()
    p = seeds.paired_p_value(mean, sd, 3)
    assert p == pytest.approx(stats.ttest_1samp(gains, 0).pvalue)
    half = T_TABLE[2] * sd / math.sqrt(3)
    assert (p < seeds.ALPHA) == (mean - half > 0)  # the 95% interval excludes zero
    assert math.isnan(seeds.paired_p_value(mean, sd, 2))  # below three seeds: no test
    assert seeds.paired_p_value(0.01, 0.0, 3) == 0.0


def test_each_claim_carries_its_p_value_and_holms(seed_runs):
    from scipy import stats

    from repro.analysis.runs import read_run

    claims = check_claims(seed_runs, "tiny", seeds=3)
    tested = claims.dropna(subset=["p_value"])
    assert len(tested) >= 4  # every paired claim of Table 1's nonlinear queries
    assert claims["p_holm"].tolist() == pytest.approx(
        seeds.holm(claims["p_value"]).tolist(), nan_ok=True
    )
    by = claims.set_index(["claim", "experiment"])
    control = by.loc[("beats mlp4.75", "resgelu-lr3e-3")]
    loss = lambda name, k: read_run(seed_runs / seed_dir("", k) / name).loss_at(12)
    gains = [
        (loss("mlp4.75", k) - loss("resgelu-lr3e-3", k)) / loss("mlp4.75", k) for k in range(3)
    ]
    assert control["p_value"] == pytest.approx(stats.ttest_1samp(gains, 0).pvalue)
    assert control["p_holm"] >= control["p_value"]
    assert not (claims["holds"] == True)[claims["p_holm"] >= seeds.ALPHA].any()  # noqa: E712
    one = check_claims(seed_runs, "tiny")  # one seed: no test, nothing corrected
    assert one["p_value"].isna().all() and one["p_holm"].isna().all()


def test_a_claim_that_holds_alone_may_not_hold_among_several():
    from repro.analysis.claims import corrected

    claims = pd.DataFrame(
        {
            "claim": ["a", "b", "c"],
            "holds": [True, True, None],
            "detail": ["x", "y", "z"],
            "p_value": [0.03, 0.04, float("nan")],
        }
    )
    out = corrected(claims)
    assert out["p_holm"].tolist()[:2] == pytest.approx([0.06, 0.06])
    assert out["holds"].tolist() == [None, None, None]
    assert out.at[0, "detail"].startswith(
        "not distinguishable after Holm's correction over the 2 claims checked together: "
        "paired t-test p 0.03, corrected 0.06"
    )
    assert corrected(claims.assign(holds=[True, True, None], p_value=[0.01, 0.02, None]))[
        "holds"
    ].tolist()[:2] == [True, True]


def test_the_seeds_table_states_bits_per_byte_over_the_seeds(seed_runs):
    from repro.analysis.results import val_bpb
    from repro.analysis.runs import read_run
    from repro.config import load_preset

    row = seeds.table1_seeds(seed_runs, "tiny", 3).set_index("experiment").loc["resgelu-lr3e-3"]
    runs = [read_run(seed_runs / seed_dir("", k) / "resgelu-lr3e-3") for k in range(3)]
    bpb = [val_bpb(run, run.loss_at(12), 12, load_preset("tiny")) for run in runs]
    assert bpb[0] / 4.93 == pytest.approx(bpb[1] / 5.12)  # one text: bits per byte scale with loss
    assert row["val_bpb_mean"] == pytest.approx(sum(bpb) / 3)
    sd = pd.Series(bpb).std()
    assert row["val_bpb_ci_high"] == pytest.approx(
        sum(bpb) / 3 + T_TABLE[2] * sd / math.sqrt(3), rel=1e-3
    )
