"""The query ablation (repro.annex.groups.ablation) and its claims, on runs of group
`query_ablation` at the tiny preset (table step 12, seeds 0..2) derived from the tiny run `repro
train` wrote (derived_runs' write_run: each run's configuration, identity and sizes its own)."""

import shutil

import pandas as pd
import pytest
from conftest import REPO

from repro.annex.claims.joint import joint_claims
from repro.annex.groups.ablation import GROUP, ablation
from repro.config import load_config, seed_dir

SEEDS = 3
SHIFT = [0.0, 0.05, -0.03]  # each seed's batches and evaluation sequences, shared by its runs
NOISE = [0.004, -0.003, 0.0]  # each run's own
# Each arm's loss at its three settings (6e-4/0.1, 1.5e-3/2^-5, 3e-3/2^-5): the paper's
# story, the nonlinear query best at its own rate and the GELU worth 0.08 nats.
LOSSES = {
    "linear": [5.00, 4.95, 4.93],
    "linear + qk_norm": [4.99, 4.92, 4.90],
    "residual_linear": [5.01, 4.96, 4.95],
    "residual_bottleneck_linear": [4.98, 4.92, 4.90],
    "residual_gelu": [4.95, 4.86, 4.82],
    "residual_gelu + qk_norm": [4.94, 4.83, 4.84],
    "identity": [5.10, 5.05, 5.04],
    "linear + headwise gate": [4.99, 4.93, 4.91],
    "linear + elementwise gate": [4.98, 4.91, 4.88],
    "identity + elementwise gate": [5.02, 4.95, 4.90],
}


def arms():
    """Arm name -> the group's experiments of that arm, in the order of the settings."""
    _, experiments = load_config("tiny")
    by_arm = {}
    for e in experiments.group(GROUP):
        gate = e.model.get("attention_gate")
        arm = e.query_mode + " + qk_norm" * bool(e.model.get("qk_norm"))
        by_arm.setdefault(arm + (f" + {gate} gate" if gate else ""), []).append(e)
    return by_arm


@pytest.fixture
def write_runs(write_run):
    """Write the group's runs at seeds 0..2, each evaluated at 0, 4, 8 and 12 and ending at its
    arm's loss (shifted by seed and run), or diverged at step 6 where the loss is None."""

    def write(runs_dir, losses=LOSSES, leave_out=()):
        for arm, experiments in arms().items():
            for e, loss in zip(experiments, losses[arm]):
                for k in range(SEEDS):
                    if f"{seed_dir('', k)}/{e.name}".lstrip("/") in leave_out:
                        continue
                    folder = runs_dir / seed_dir("", k) / e.name
                    if loss is None:
                        write_run(
                            folder,
                            e.name,
                            {0: 10.9, 4: 8.0},
                            last_step=6,
                            seed=k,
                            status="diverged",
                            diverged_step=6,
                        )
                    else:
                        value = loss + SHIFT[k] + NOISE[k] * (len(arm) % 3)
                        val = {0: 10.9, 4: 8.0, 8: 6.5, 12: value}
                        write_run(folder, e.name, val, last_step=12, seed=k)
        return runs_dir

    return write


def ablation_claims(runs_dir):
    claims = joint_claims(runs_dir, "tiny", seeds=SEEDS).set_index("claim")
    return {
        c: tuple(claims.loc[c, ["experiment", "holds", "detail"]])
        for c in (
            "the gain needs the nonlinearity",
            "the gain survives QK-norm",
            "the nonlinear query beats the best-tuned stabilised baseline",
            "the nonlinear query beats the parameter-matched gate",
        )
    }


def test_the_group_gives_ten_arms_the_same_settings():
    settings = {
        arm: [(e.optimizer.lr_max, e.optimizer.lr_min, e.optimizer.weight_decay) for e in members]
        for arm, members in arms().items()
    }
    assert set(settings) == set(LOSSES)
    assert len({tuple(s) for s in settings.values()}) == 1  # one grid for every arm
    assert settings["linear"] == [(6e-4, 6e-5, 0.1), (1.5e-3, 3e-5, 0.03125), (3e-3, 3e-5, 0.03125)]


def test_each_arm_is_at_its_best_setting_paired_with_the_best_linear(tmp_path, write_runs):
    result = ablation(write_runs(tmp_path), "tiny", SEEDS)
    table = result.table.set_index("arm")
    assert result.missing == []
    assert table.loc["residual_gelu", "best"] == "resgelu-lr3e-3"
    assert table.loc["residual_gelu + qk_norm", "best"] == "resgelu-qknorm-lr1.5e-3"
    assert (table["reference"] == "baseline-wd3.125e-2-lr3e-3").all()
    gelu = table.loc["residual_gelu"]
    assert gelu["n_pairs"] == 3 and gelu["loss_gap_mean"] == pytest.approx(0.11, abs=0.005)
    assert gelu["rel_improvement_ci_low"] > 0
    assert table.loc["linear", "loss_gap_mean"] == 0  # the reference against itself
    # each arm's own spread, and the paired gap in units of the noisier arm's
    assert gelu["spread_from"] in ("resgelu-lr3e-3", "baseline-wd3.125e-2-lr3e-3")
    assert gelu["gap_in_spreads"] == pytest.approx(gelu["loss_gap_mean"] / gelu["spread_sd"])


def test_the_ablation_says_the_nonlinearity_matters(tmp_path, write_runs):
    claims = ablation_claims(write_runs(tmp_path))
    experiment, holds, detail = claims["the gain needs the nonlinearity"]
    assert (experiment, holds) == ("resgelu-lr3e-3", True)
    assert "best bottleneck-linear-lr3e-3" in detail and "95% CI" in detail
    assert claims["the gain survives QK-norm"][1] is True
    assert claims["the nonlinear query beats the best-tuned stabilised baseline"][1] is True


def test_the_nonlinear_query_against_the_gate_with_its_parameters(tmp_path, write_runs):
    """Identity + elementwise gate: W_Q's d^2 parameters a layer moved to the gate; the claim
    pairs the best of each arm seed by seed and names them."""
    experiment, holds, detail = ablation_claims(write_runs(tmp_path))[
        "the nonlinear query beats the parameter-matched gate"
    ]
    assert (experiment, holds) == ("resgelu-lr3e-3", True)
    assert "best identity-gate-elementwise-lr3e-3" in detail and "95% CI" in detail
    table = ablation(tmp_path, "tiny", SEEDS).table.set_index("arm")
    gated = table.loc["identity + elementwise gate"]
    assert (gated["query_mode"], gated["attention_gate"]) == ("identity", "elementwise")
    better_gate = {**LOSSES, "identity + elementwise gate": [5.0, 4.85, 4.76]}
    claims = ablation_claims(write_runs(tmp_path / "gate", better_gate))
    assert claims["the nonlinear query beats the parameter-matched gate"][1] is False


def test_the_gated_arms_name_the_runs_they_miss(tmp_path, write_runs):
    runs = write_runs(tmp_path, leave_out={"seed2/identity-gate-elementwise"})
    experiment, holds, detail = ablation_claims(runs)[
        "the nonlinear query beats the parameter-matched gate"
    ]
    assert (experiment, holds) == (GROUP, None)
    assert "1 runs missing: seed2/identity-gate-elementwise" in detail


def test_the_ablation_says_the_nonlinearity_does_not_matter(tmp_path, write_runs):
    # the bottleneck without its GELU as good, and the stabilised linear query tuned to match
    same = {
        **LOSSES,
        "residual_bottleneck_linear": [4.96, 4.86, 4.81],
        "linear + qk_norm": [4.99, 4.85, 4.78],
    }
    claims = ablation_claims(write_runs(tmp_path, same))
    experiment, holds, detail = claims["the gain needs the nonlinearity"]
    assert holds is not True and "best bottleneck-linear-lr3e-3" in detail
    assert claims["the gain survives QK-norm"][1] is False
    assert claims["the nonlinear query beats the best-tuned stabilised baseline"][1] is False


def test_a_diverged_setting_is_out_of_its_arms_running(tmp_path, write_runs):
    diverging = {**LOSSES, "linear + qk_norm": [4.99, 4.92, None]}
    table = ablation(write_runs(tmp_path, diverging), "tiny", SEEDS).table.set_index("arm")
    row = table.loc["linear + qk_norm"]
    assert row["best"] == "baseline-qknorm-wd3.125e-2-lr1.5e-3" and row["settings_complete"] == 2


def test_missing_runs_are_named_by_the_claims_they_hold_up(tmp_path, write_runs):
    runs = write_runs(tmp_path, leave_out={"seed1/bottleneck-linear-lr1.5e-3"})
    claims = ablation_claims(runs)
    experiment, holds, detail = claims["the gain needs the nonlinearity"]
    assert (experiment, holds) == (GROUP, None)
    assert "1 runs missing: seed1/bottleneck-linear-lr1.5e-3" in detail
    assert claims["the gain survives QK-norm"][1] is True  # its arms are all there


@pytest.mark.slow  # papermill runs the notebook in its own kernel
def test_the_notebook_writes_the_table_and_its_html(tmp_path, write_runs):
    from conftest import run_checkout_notebook

    runs = write_runs(tmp_path / "runs" / "tiny")
    out = {
        "out_csv": tmp_path / "ablation.csv",
        "out_html": tmp_path / "ablation.html",
        "out_settings": tmp_path / "settings.csv",
        "out_figure": tmp_path / "ablation.png",
        "out_figure_html": tmp_path / "ablation-figure.html",
    }
    run_checkout_notebook("ablation", tmp_path, runs_dir=runs, seeds=SEEDS, **out)
    assert out["out_figure"].read_bytes().startswith(b"\x89PNG")  # every setting, its interval
    assert (tmp_path / "ablation.pdf").exists() and "<img" in out["out_figure_html"].read_text()
    table = pd.read_csv(out["out_csv"])
    assert list(table["arm"]) == list(LOSSES)
    assert len(pd.read_csv(out["out_settings"])) == 30
    assert "resgelu-qknorm-lr1.5e-3" in out["out_html"].read_text()


def test_the_figure_draws_every_setting_with_its_interval(tmp_path, write_runs):
    from repro.annex.groups.final_losses import final_losses

    settings = ablation(write_runs(tmp_path / "runs" / "tiny"), "tiny", SEEDS).settings
    ax = final_losses(settings.table, settings.losses, "ablation").axes[0]
    assert len(ax.containers) == 30  # one mean with its 95% interval per setting, three seeds
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert labels == list(settings.table["experiment"])
    bold = [label.get_text() for label in ax.get_yticklabels() if label.get_fontweight() == "bold"]
    assert bold == list(settings.table.loc[settings.table["best"].eq(True), "experiment"])


def test_no_runs_yet_is_a_table_without_bests(tmp_path):
    result = ablation(tmp_path, "tiny", 1)
    assert result.table["best"].isna().all() and len(result.missing) == 30
    _, holds, detail = ablation_claims_at_one_seed(tmp_path)
    assert holds is None and "6 runs missing" in detail


def ablation_claims_at_one_seed(runs_dir):
    claims = joint_claims(runs_dir, "tiny", seeds=1).set_index("claim")
    return tuple(claims.loc["the gain needs the nonlinearity", ["experiment", "holds", "detail"]])


@pytest.mark.parametrize("experiment", ["identity-gate-elementwise", "d2z-resgelu-lr4.8e-3"])
def test_a_gated_or_decaying_run_trains_and_records_what_it_is(
    experiment, token_dir, tiny_indices, tmp_path
):
    """`repro train` of a gated arm (and of a run decaying to zero) at the tiny preset: its run
    records the option in its identity, the gates' parameters, and a learning rate of zero at the
    end of the decay."""
    from conftest import train_args

    from repro.analysis.runs import read_run
    from repro.cli.assembly import main

    args = train_args(token_dir, tiny_indices, tmp_path / "run")
    args[args.index("baseline")] = experiment
    assert main(args) == 0
    run = read_run(tmp_path / "run")
    assert run.status == "completed" and run.loss_at(12) > 0
    model, train = run.record.identity["model"], run.record.identity["train"]
    if experiment.startswith("identity-gate"):
        assert model["attention_gate"] == "elementwise" and train["schedule"] == "cosine"
        assert run.record.params["gate_params"] == 2 * 32 * 32  # tiny: 2 layers, d 32
    else:
        assert model["attention_gate"] is None and train["schedule"] == "linear"
        assert run.metrics["lr"].iloc[-1] == 0.0


def test_an_arm_whose_learning_rate_was_edited_after_its_runs_is_not_reported_at_the_new_one(
    tmp_path, write_runs
):
    runs = write_runs(tmp_path / "runs")
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    experiments = (config / "experiments.yaml").read_text()
    entry = experiments.index("  resgelu-lr3e-3:\n")
    edited = experiments[entry:].replace("lr_max: 3.0e-3", "lr_max: 3.5e-3", 1)
    (config / "experiments.yaml").write_text(experiments[:entry] + edited)
    result = ablation(runs, "tiny", SEEDS, config)
    table = result.table.set_index("arm")
    assert table.loc["residual_gelu", "best"] != "resgelu-lr3e-3"
    assert (
        "resgelu-lr3e-3: seed0: optimizer.lr_max: 0.003 -> 0.0035"
        in (table.loc["residual_gelu", "config_differences"])
    )
