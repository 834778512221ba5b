"""results/evidence.csv (repro.annex.claims.evidence, `repro evidence`): the paper's claims (v1)
beside our runs over seeds, the authors' and the audit's, each read at the paper's step and at
its own end, "not available" where a source lacks the run, and every number read again from the
file it names."""

import json
import re
import shutil

import pandas as pd
import pytest
from audit_helpers import curve, write_log
from conftest import one_line_error

from repro.annex.claims import evidence
from repro.annex.claims.evidence import NOT_AVAILABLE, PAPER, evidence_table, verify_evidence
from repro.cli.assembly import main
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


def reading(table, experiment, quantity, source, read_at, version=evidence.V1):
    rows = table[
        table["claim"].str.endswith(f"({version})")
        & (table["experiment"] == experiment)
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
    ours = reading(table, "resgelu-lr3e-3", "val_loss", "ours", evidence.TABLE_STEP)
    assert (ours["n_seeds"], ours["step"]) == (2, 12)
    assert ours["value"] == pytest.approx((5.0 - 0.07 + 4.96) / 2)
    assert ours["ci_low"] < ours["value"] < ours["ci_high"]  # two seeds: an interval
    gain = reading(table, "resgelu-lr3e-3", "rel_improvement", "ours", "its own end")
    assert gain["value"] == pytest.approx(((5.0 - 4.93) / 5.0 + (5.1 - 4.96) / 5.1) / 2)
    # The authors' runs were not given; the audit's as-experiment run is only the baseline.
    authors = reading(table, "mlp4.75", "val_loss", "authors", evidence.TABLE_STEP)
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
    later = table[table["source"].str.startswith("paper v2")]
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


def test_verifying_reads_each_run_once_however_many_rows_name_it(tiny_runs, monkeypatch):
    """A long run's metrics.csv is 100 MB: read again for each row that names it (a dozen claims
    read the baseline), verifying took minutes."""
    table = evidence_table(tiny_runs, "tiny")
    reads = []
    read_run = evidence.read_run
    monkeypatch.setattr(evidence, "read_run", lambda path: reads.append(path) or read_run(path))
    assert verify_evidence(table) == []
    assert reads and len(reads) == len(set(reads)), sorted(map(str, reads))


def test_a_run_of_another_configuration_is_flagged(tiny_runs):
    """A folder holding another experiment's run (the baseline's, in mlp4.75's folder)."""
    shutil.rmtree(tiny_runs / "mlp4.75")
    shutil.copytree(tiny_runs / "baseline", tiny_runs / "mlp4.75")
    table = evidence_table(tiny_runs, "tiny")
    row = reading(table, "mlp4.75", "val_loss", "ours", evidence.TABLE_STEP)
    assert row["config_differences"] == "model.mlp_hidden: 128 -> 152"


def test_a_copy_of_seed_0s_run_in_seed_1s_folder_is_flagged_and_left_out(tiny_runs):
    """Seed 1's folder holding seed 0's run: not an independent seed (an interval of zero width);
    Table 1 over seeds leaves it out too."""
    shutil.copytree(tiny_runs / "baseline", tiny_runs / "seed1" / "baseline")
    table = evidence_table(tiny_runs, "tiny", 2)
    row = reading(table, "baseline", "val_loss", "ours", evidence.TABLE_STEP)
    assert row["n_seeds"] == 1 and pd.isna(row["ci_low"])
    assert row["config_differences"] == (
        "seed1 left out: train.init_seed: 1337 -> 1338, train.index_seed: 42 -> 43"
    )


def test_a_relative_improvement_names_the_baseline_it_divides_by(tiny_runs):
    shutil.rmtree(tiny_runs / "baseline")
    shutil.copytree(tiny_runs / "mlp4.75", tiny_runs / "baseline")  # mlp4.75's run as baseline
    table = evidence_table(tiny_runs, "tiny")
    row = reading(table, "resgelu-lr3e-3", "rel_improvement", "ours", "its own end")
    assert row["config_differences"] == (
        "divided by mlp4.75's loss; mlp4.75: model.mlp_hidden: 152 -> 128"
    )


def test_a_log_stated_as_the_baseline_is_flagged_where_it_fits_the_widened_mlp_too(
    tiny_runs, tmp_path
):
    """A statement cannot say the MLP's width, the weight decay or the final rate: a log stated in
    full to be the baseline fits mlp4.75 as well, and every row it stands in says so."""
    log = write_log(tmp_path / "gpt3large_linear.csv", curve(12, interval=4, end=5.0))
    out = tmp_path / "logs" / "tiny" / "gpt3large_linear"
    stated = {"query_mode": "linear", "qk_norm": False, "gate": "none", "peak_lr": 6e-4}
    stated |= {"schedule": "cosine", "steps": 12}
    command = ["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]
    assert main([*command, "--stated", json.dumps(stated)]) == 0
    table = evidence_table(tiny_runs, "tiny", audit_logs_dir=out.parent)
    rows = table[table["source"] == "audit: gpt3large_linear"]
    table1 = rows[rows["claim"].str.endswith(f"({evidence.V1})")]
    assert set(table1["experiment"]) == {"baseline", "mlp4.75"}
    for differences in rows["config_differences"]:
        assert re.search(
            r"ambiguous: its statement fits \d+ experiments alike \(baseline, mlp4", differences
        )
        assert "mlp_hidden, weight_decay, lr_min: unknown (no statement says them)" in differences


def test_an_imported_log_whose_statement_is_not_an_object_is_one_line(tiny_runs, tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_linear.csv", curve(12, interval=4, end=5.0))
    out = tmp_path / "logs" / "tiny" / "gpt3large_linear"
    command = ["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]
    assert main([*command, "--stated", json.dumps({"query_mode": "linear"})]) == 0
    record = json.loads((out / "run.json").read_text())
    record["data"]["stated"] = "linear"
    (out / "run.json").write_text(json.dumps(record))
    argv = ["evidence", "--preset", "tiny", "--runs", tiny_runs, "--audit-logs", out.parent]
    argv += ["--out", tmp_path / "evidence.csv"]
    one_line_error(capsys, argv, r"gpt3large_linear/run\.json: data\.stated: 'linear' is not")


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--seeds", "0", r"seeds 0: a count of seeds is 1\.\.100"),
        ("--seeds", "-5", r"seeds -5: a count of seeds is 1\.\.100"),
        ("--seeds", "1000000000", r"seeds 1000000000: a count of seeds is 1\.\.100"),
        ("--runs", "a-file", r"--runs: \S*a-file is not a folder"),
        ("--runs", "missing", r"--runs: \S*missing is not a folder"),
        ("--audit-logs", "missing", r"--audit-logs: \S*missing is not a folder"),
        ("--authors-runs", "ours", r"tiny/baseline: a run of source 'repro' \(run\.json\), not 'a"),
        ("--audit-runs", "ours", r"tiny/baseline: a run of source 'repro' \(run\.json\), not 'au"),
    ],
)
def test_a_bad_evidence_option_is_one_line(tiny_runs, tmp_path, capsys, option, value, message):
    (tmp_path / "a-file").write_text("not a folder\n")
    paths = {"a-file": tmp_path / "a-file", "missing": tmp_path / "missing", "ours": tiny_runs}
    given = str(paths.get(value, value))
    out = tmp_path / "evidence.csv"
    command = ["evidence", "--preset", "tiny", "--runs", str(tiny_runs), "--out", str(out)]
    assert main([*command, option, given]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not out.exists()


def test_writing_a_file_keeps_the_users_file_of_its_name_and_partial(tiny_runs, tmp_path):
    mine = tmp_path / "mine.csv.partial"
    mine.write_text("the user's own notes\n")
    out = tmp_path / "mine.csv"
    assert main(["evidence", "--preset", "tiny", "--runs", str(tiny_runs), "--out", str(out)]) == 0
    assert mine.read_text() == "the user's own notes\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [out.name, mine.name]
