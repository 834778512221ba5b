"""results/evidence.csv (repro.annex.evidence, `repro evidence`): the paper's claims (v1)
beside our runs over seeds, the authors' and the audit's, each read at the paper's step and at
its own end, "not available" where a source lacks the run, and every number read again from the
file it names."""

import json
import shutil

import pandas as pd
import pytest
from test_audit import curve, write_log

from repro.annex.evidence import NOT_AVAILABLE, PAPER, evidence_table, verify_evidence
from repro.cli import main
from repro.config import load_config


@pytest.fixture
def sources(tiny_runs, tmp_path, write_run):
    """Our Table 1 runs at tiny (seed 0, and seed 1 of resgelu-lr3e-3 and the baseline), and the
    audit's logs: one imported as the baseline, one stated to be resgelu-lr3e-3 whose log goes on
    past the paper's step, and one whose configuration nobody stated."""
    for name, losses in (
        ("baseline", [10.0, 8.1, 6.1, 5.1]),
        ("resgelu-lr3e-3", [10.0, 7.6, 5.9, 4.96]),
    ):
        write_run(
            tiny_runs / "seed1" / name, name, dict(zip([0, 4, 8, 12], losses)), last_step=12, seed=1
        )
    logs = tmp_path / "logs"
    write_log(logs / "gpt3large_linear_seed43.csv", curve(12, interval=4, start=10.0, end=5.02))
    write_log(
        logs / "gpt3large_resgelu_s0p5_seed43.csv", curve(12, interval=4, start=10.0, end=4.9)
    )
    write_log(logs / "gpt3large_unknown.csv", curve(8, interval=4, start=10.0, end=6.0))
    audit = tmp_path / "audit"
    as_ours = ["import-audit-log", str(logs / "gpt3large_linear_seed43.csv"), "--preset", "tiny"]
    assert (
        main([*as_ours, "--experiment", "baseline", "--out", str(audit / "as" / "baseline")]) == 0
    )
    stated = {"gpt3large_resgelu_s0p5_seed43.csv": {"query_mode": "residual_gelu", "peak_lr": 3e-3}}
    for log in logs.iterdir():
        command = ["import-audit-log", str(log), "--preset", "tiny"]
        out = audit / "logs" / "tiny" / log.stem
        assert (
            main([*command, "--out", str(out), "--stated", json.dumps(stated.get(log.name, {}))])
            == 0
        )
    return tiny_runs, audit


def reading(table, experiment, quantity, source, read_at):
    rows = table[
        (table["experiment"] == experiment)
        & (table["quantity"] == quantity)
        & (table["source"] == source)
        & (table["read_at"] == read_at)
    ]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_each_claim_stands_beside_every_source(sources, tmp_path, capsys):
    runs, audit = sources
    out = tmp_path / "evidence.csv"
    command = [
        "evidence",
        "--preset",
        "tiny",
        "--runs",
        str(runs),
        "--seeds",
        "2",
        "--out",
        str(out),
    ]
    command += ["--audit-runs", str(audit / "as"), "--audit-logs", str(audit / "logs" / "tiny")]
    assert main([*command, "--html", str(tmp_path / "evidence.html")]) == 0
    assert f"{out}: " in capsys.readouterr().out
    table = pd.read_csv(out)
    assert verify_evidence(table) == []  # every number is the one its files hold
    _, experiments = load_config("tiny")
    paper = experiments["resgelu-lr3e-3"].paper
    v1 = reading(table, "resgelu-lr3e-3", "rel_improvement", PAPER, "the paper's step")
    assert (v1["value"], v1["step"]) == (paper.rel_improvement, 59000)
    ours = reading(table, "resgelu-lr3e-3", "val_loss", "ours", "the paper's step")
    assert (ours["n_seeds"], ours["step"]) == (2, 12)
    assert ours["value"] == pytest.approx((5.0 - 0.07 + 4.96) / 2)
    assert ours["ci_low"] < ours["value"] < ours["ci_high"]  # two seeds: an interval
    gain = reading(table, "resgelu-lr3e-3", "rel_improvement", "ours", "its own end")
    assert gain["value"] == pytest.approx(((5.0 - 4.93) / 5.0 + (5.1 - 4.96) / 5.1) / 2)
    # The authors' runs were not given; the audit's as-experiment run is only the baseline.
    authors = reading(table, "mlp4.75", "val_loss", "authors", "the paper's step")
    assert authors["status"] == NOT_AVAILABLE
    assert reading(table, "mlp4.75", "val_loss", "audit", "its own end")["status"] == NOT_AVAILABLE
    assert reading(table, "baseline", "val_loss", "audit", "its own end")["value"] == pytest.approx(
        5.02
    )
    stated = reading(
        table, "resgelu-lr3e-3", "val_loss", "audit: gpt3large_resgelu_s0p5_seed43", "its own end"
    )
    assert (stated["value"], stated["status"]) == (pytest.approx(4.9), "stopped")  # no horizon
    assert not table["source"].str.contains("gpt3large_unknown").any()  # its configuration unknown
    assert (
        "configuration unknown: qk_norm, gate, schedule, steps not stated"
        in stated["config_differences"]
    )
    assert pd.isna(ours["config_differences"])  # recorded as the experiment is now
    later = table[table["source"].str.startswith("paper v3")]
    assert set(later["value"]) == {0.024, 0.0681}
    assert set(later["status"]) == {"claimed; its table not seen"}
    assert "2603.13381v1" in (tmp_path / "evidence.html").read_text()


def test_a_number_that_differs_from_its_file_is_found(sources, tmp_path):
    runs, audit = sources
    table = evidence_table(runs, "tiny", 2, audit_runs_dir=audit / "as")
    assert verify_evidence(table) == []
    row = (
        (table["source"] == "ours")
        & (table["experiment"] == "mlp4.75")
        & (table["quantity"] == "val_loss")
    )
    table.loc[row & (table["read_at"] == "its own end"), "value"] += 0.001
    (failure,) = verify_evidence(table)
    assert (
        failure.startswith("mlp4.75: val_loss")
        and "ours, its own end: the files say 4.96" in failure
    )


def test_a_run_of_another_configuration_is_flagged(tiny_runs):
    """A folder holding another experiment's run (the baseline's, in mlp4.75's folder)."""
    shutil.rmtree(tiny_runs / "mlp4.75")
    shutil.copytree(tiny_runs / "baseline", tiny_runs / "mlp4.75")
    table = evidence_table(tiny_runs, "tiny")
    row = reading(table, "mlp4.75", "val_loss", "ours", "the paper's step")
    assert row["config_differences"] == "model.mlp_hidden: 128 -> 152"
