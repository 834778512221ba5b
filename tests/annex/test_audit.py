"""The audit's logs (repro.annex.authors.audit): its neurreps_writeup/logs/ CSVs (format in
audit_helpers; attention-logit probes `step,L0,L12,L23,max` beside them) imported read-only as run
directories, at the horizon their name or their user's statement gives, diverged where the audit's
guard ended them; statements that cannot be had are refused in one line."""

import json
import re

import pytest
from audit_helpers import curve, write_log
from conftest import train_args

from repro.analysis.runs import read_run
from repro.annex.authors.audit import AuditError, import_audit_log, import_audit_logs
from repro.cli.assembly import main
from repro.config import load_preset
from repro.files import file_sha256


@pytest.fixture
def logs(tmp_path):
    """A logs folder like the audit's: large-scale runs (completed, diverged, cut short), a
    small-scale one, and an attention-logit probe."""
    folder = tmp_path / "neurreps_writeup" / "logs"
    write_log(folder / "gpt3large_linear_qknorm_lr1p5e3_seed43.csv", curve(60000))
    write_log(folder / "gpt3large_linear_plain_seed43_diverged.csv", curve(25000, spike_at=25000))
    write_log(folder / "gpt3large_resgelu_s0p5_seed45.csv", curve(40000))  # still running
    write_log(folder / "gpt3small_d2z_lr2p4e3_60k.csv", curve(60000, end=2.9))
    probe = [(0, "4.3", "3.6", "3.5", "4.3"), (1000, "9.2", "64.0", "35.0", "64.0")]
    write_log(folder / "logit_d2z_lr1e3.csv", probe, header="step,L0,L12,L23,max")
    return folder


def test_a_logs_folder_imports_as_runs_read_only(logs, tmp_path, capsys):
    before = {p.name: file_sha256(p) for p in logs.iterdir()}
    out = tmp_path / "audit"
    assert main(["import-audit-logs", str(logs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "4 runs of the audit imported" in printed
    assert "gpt3small_d2z_lr2p4e3_60k: completed its 60000-step horizon" in printed
    assert {p.name: file_sha256(p) for p in logs.iterdir()} == before  # the folder is only read
    assert sorted(p.name for p in (out / "large").iterdir()) == [
        "gpt3large_linear_plain_seed43_diverged",
        "gpt3large_linear_qknorm_lr1p5e3_seed43",
        "gpt3large_resgelu_s0p5_seed45",
    ]
    assert [p.name for p in (out / "paper").iterdir()] == ["gpt3small_d2z_lr2p4e3_60k"]
    assert read_run(out / "paper" / "gpt3small_d2z_lr2p4e3_60k").status == "completed"  # _60k
    tuned = read_run(out / "large" / "gpt3large_linear_qknorm_lr1p5e3_seed43")
    assert (tuned.status, tuned.record.source, tuned.record.preset) == (
        "stopped",  # its name says no horizon, and nobody stated one
        "audit",
        "large",
    )
    assert tuned.record.data["outcome"] == "stopped at step 60000, its horizon unknown"
    assert (tuned.record.config, tuned.record.data["stated"]) == ({}, {})
    evals = tuned.evals()
    assert evals.index.tolist() == list(range(0, 60001, 1000))
    assert evals.at[60000, "eval_val_loss"] == pytest.approx(2.55)
    assert evals.at[0, "eval_train_loss"] == pytest.approx(11.099)
    assert tuned.metrics["step"].tolist() == list(range(60001))  # one row a step, as ours
    diverged = read_run(out / "large" / "gpt3large_linear_plain_seed43_diverged")
    assert (diverged.status, diverged.record.diverged_step) == ("diverged", 25000)
    assert "more than 0.5 above its best" in diverged.record.diverged_reason
    assert read_run(out / "large" / "gpt3large_resgelu_s0p5_seed45").status == "stopped"
    # Imported runs are never trained over.
    assert main(train_args(tmp_path, tmp_path, out / "paper" / "gpt3small_d2z_lr2p4e3_60k")) == 2
    assert "imported from the audit's artefacts, never trained over" in capsys.readouterr().err


def test_a_folder_with_one_malformed_log_imports_nothing(logs, tmp_path, capsys):
    (logs / "gpt3large_broken.csv").write_text("step,train_loss,val_loss\n0,11.1,x\n")
    out = tmp_path / "audit"
    assert main(["import-audit-logs", str(logs), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gpt3large_broken.csv, line 2, column val_loss: 'x'" in err
    assert not out.exists()  # every log is checked before anything is written


def test_a_log_whose_name_says_no_scale_is_refused(tmp_path):
    write_log(tmp_path / "logs" / "mystery_run.csv", curve(2000))
    with pytest.raises(AuditError, match=r"mystery_run\.csv: its name does not say its scale"):
        import_audit_logs(tmp_path / "logs", tmp_path / "out")


def test_a_log_is_completed_only_at_a_known_horizon(tmp_path, capsys):
    """The audit's small-scale sweep: `_60k` runs that reached step 60000, and a `_180k` run
    that stopped at 60000 (the audit calls it unfinished)."""
    logs = tmp_path / "logs"
    write_log(logs / "gpt3small_d2z_lr4p8e3_60k.csv", curve(60000, start=10.9906, end=2.8948))
    write_log(logs / "gpt3small_d2z_lr6e4_180k.csv", curve(60000, start=10.9906, end=3.0191))
    write_log(logs / "gpt3large_linear_qknorm_lr1p5e3_seed43.csv", curve(60000))
    out = tmp_path / "audit"
    assert main(["import-audit-logs", str(logs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "gpt3small_d2z_lr6e4_180k: stopped at step 60000 of its 180000-step horizon" in printed
    assert "gpt3small_d2z_lr4p8e3_60k: completed its 60000-step horizon" in printed
    assert (
        "gpt3large_linear_qknorm_lr1p5e3_seed43: stopped at step 60000, its horizon unknown"
        in printed
    )
    unfinished = read_run(out / "paper" / "gpt3small_d2z_lr6e4_180k").record
    assert (unfinished.status, unfinished.data["horizon"], unfinished.data["horizon_from"]) == (
        "stopped",
        180000,
        "its name",
    )
    # What the user states of a run is its configuration: the horizon among it.
    stated = {"steps": 60002, "query_mode": "linear", "qk_norm": True, "peak_lr": 1.5e-3}
    command = ["import-audit-logs", str(logs), "--out", str(out)]
    assert (
        main(
            [
                *command,
                "--stated",
                json.dumps({"gpt3large_linear_qknorm_lr1p5e3_seed43.csv": stated}),
            ]
        )
        == 0
    )
    tuned = read_run(out / "large" / "gpt3large_linear_qknorm_lr1p5e3_seed43").record
    assert (tuned.status, tuned.data["stated"], tuned.data["horizon_from"]) == (
        "completed",
        stated,
        "stated",
    )


@pytest.mark.parametrize(
    "stated,message",
    [
        (
            '{"gpt3large_x.csv": {"steps": 0}}',
            r"gpt3large_x.csv: steps: 0 is less than the minimum of 1",
        ),
        (
            '{"gpt3large_x.csv": {"query": "linear"}}',
            r"gpt3large_x.csv: \(top level\): unknown key 'query'",
        ),
        (
            '{"gone.csv": {"steps": 60000}}',
            r"no loss log 'gone.csv', whose configuration is stated",
        ),
        ("[1]", r"--stated: '\[1\]' is not a JSON object"),
    ],
)
def test_a_statement_that_cannot_be_had_is_refused_naming_it(tmp_path, capsys, stated, message):
    write_log(tmp_path / "logs" / "gpt3large_x.csv", curve(2000))
    out = tmp_path / "audit"
    assert (
        main(["import-audit-logs", str(tmp_path / "logs"), "--out", str(out), "--stated", stated])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(message, err), err
    assert not out.exists()


def test_a_log_ending_on_nan_at_its_horizon_diverged(tmp_path):
    rows = curve(60000, end=2.9)[:-1] + [(60000, "nan", "nan")]
    record = import_audit_log(
        write_log(tmp_path / "gpt3small_d2z_lr9p6e3_60k.csv", rows),
        tmp_path / "run",
        load_preset("paper"),
    )
    assert (record.status, record.diverged_step) == ("diverged", 60000)


def test_a_log_the_audits_guard_ended_diverged_at_a_preset_without_the_stop(tmp_path):
    """The paper's preset trains without a divergence stop, as the authors did; the audit's
    training had one (0.5 nats above the best validation loss), and a log it ended is read so."""
    assert load_preset("paper").train.divergence_margin is None
    record = import_audit_log(
        write_log(tmp_path / "gpt3small_d2z_lr9p6e3_60k.csv", curve(25000, spike_at=25000)),
        tmp_path / "run",
        load_preset("paper"),
    )
    assert (record.status, record.diverged_step) == ("diverged", 25000)
    assert "more than 0.5 above its best" in record.diverged_reason


def test_a_log_past_the_presets_last_step_is_not_its_run(tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_long.csv", curve(16, interval=4))
    command = ["import-audit-log", str(log), "--preset", "tiny", "--experiment", "baseline"]
    assert main([*command, "--out", str(tmp_path / "run")]) == 2
    assert "line 6, column step: 16 is past step 12" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "name,stated,last,message",
    [
        ("gpt3large_x_100000k.csv", {}, [(100_000_000, 2.0, 2.1)],
         r"a horizon of 100,000,000 steps \(its name\), more than "),
        ("gpt3large_x.csv", {"steps": 100000000}, [(100_000_000, 2.0, 2.1)],
         r"100,000,000 steps \(stated\), more than 1,0"),
        # a log of 12 steps, every one within the preset's
        ("gpt3large_x.csv", {"steps": 4}, [], r"line 4, column step: 8 is past step 4, the last"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("command", ["import-audit-log", "import-audit-logs"])
def test_a_horizon_beyond_the_bound_or_before_the_logs_end_is_refused(
    tmp_path, capsys, name, stated, last, message, command
):
    """A horizon is at most 1,000,000 steps (a row at step 100,000,000 would be as many rows of
    metrics, beyond any memory); a log that runs past its stated horizon is not that run."""
    log = write_log(tmp_path / "logs" / name, curve(12, interval=4) + last)
    given = [str(log), "--preset", "tiny"] if command == "import-audit-log" else [str(log.parent)]
    statement = stated if command == "import-audit-log" else {name: stated}
    out = tmp_path / "out"
    assert main([command, *given, "--out", str(out), "--stated", json.dumps(statement)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(message, err), err
    assert not out.exists()


def test_a_statement_of_another_run_than_the_experiment_named_is_refused(tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_x.csv", curve(12, interval=4))
    command = ["import-audit-log", str(log), "--preset", "tiny", "--experiment", "baseline"]
    stated = json.dumps({"query_mode": "residual_gelu"})
    assert main([*command, "--stated", stated, "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == (
        "repro: error: --stated: query_mode: residual_gelu -> linear (stated -> experiment "
        "baseline's): the statement is of another run than --experiment baseline; give one of them"
    )
    assert not (tmp_path / "run").exists()
