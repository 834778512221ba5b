"""The audit's logs (repro.annex.authors.audit): its neurreps_writeup/logs/ CSVs, written here in
its
format (`step,train_loss,val_loss`, one row per evaluation, losses to 4 decimals; attention-logit
probes `step,L0,L12,L23,max` beside them), imported read-only as run directories, refused in one
line when malformed, and shown by `repro compare` and in Figure 1."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from types import SimpleNamespace

import matplotlib
import pytest
from conftest import train_args

matplotlib.use("Agg")

from repro.analysis import plots
from repro.analysis.runs import read_run
from repro.annex.authors.audit import AuditError, import_audit_log, import_audit_logs
from repro.annex.authors.audit_log import read_audit_log
from repro.cli import main
from repro.config import load_config, load_preset, resolve_run
from repro.files import file_sha256


def write_log(path, rows, header="step,train_loss,val_loss"):
    """A loss log as the audit writes it: its header, then `step,train,val` with 4 decimals."""
    lines = [header] + [
        ",".join(v if isinstance(v, str) else f"{v:.4f}" if i else str(v) for i, v in enumerate(r))
        for r in rows
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def curve(last_step, interval=1000, start=11.1, end=2.55, spike_at=None):
    """Rows of a falling loss curve every `interval` steps; from spike_at on, 7.2 (a divergence)."""
    n = last_step // interval
    rows = []
    for k in range(n + 1):
        val = start + (end - start) * (k / max(n, 1)) ** 0.3
        if spike_at is not None and k * interval >= spike_at:
            val = 7.2
        rows.append((k * interval, val - 0.001, val))
    return rows


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


@pytest.mark.parametrize(
    "content,message",
    [
        ("step,loss\n0,11.1\n", r"line 1: 'step,loss', not the audit's header"),
        ("", r"line 1: 'nothing', not the audit's header"),
        ("step,train_loss,val_loss\n", r"no evaluation rows"),
        ("step,train_loss,val_loss\n0,11.1018,11.1027\n1000,3.9467\n", r"line 3: 2 fields, not 3"),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,abc\n",
            r"line 3, column val_loss: 'abc' is not a number",
        ),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1k,3.9,3.9\n",
            r"line 3, column step: '1k' is not a step",
        ),
        (
            "step,train_loss,val_loss\n1000,3.9,3.9\n0,11.1,11.1\n",
            r"line 3, column step: 0 after 1000",
        ),
        (
            "step,train_loss,val_loss\n0,nan,11.1\n1000,3.9,3.9\n",
            r"line 2, column train_loss: nan is not a loss \(only a log's last row",
        ),
        ("step,train_loss,val_loss\n0,11.1,-1.0\n", r"line 2, column val_loss: -1.0 is not a loss"),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,3.9\n²000,3.8,3.8\n",
            r"line 4, column step: '²000' is not a step",
        ),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000000000,3.9,3.9\n",
            r"line 3, column step: 1000000000 is past step 60002, the last this run can have",
        ),
        (
            'step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,"10.8\n1"\n',
            r"line 3, column val_loss: '\"10.8' is not a number",
        ),
    ],
)
def test_a_malformed_log_is_refused_naming_its_line_and_column(tmp_path, content, message):
    log = tmp_path / "gpt3large_x.csv"
    log.write_text(content)
    with pytest.raises(AuditError, match=message) as refused:
        read_audit_log(log, 60002)
    assert str(refused.value).startswith(str(log)) and "\n" not in str(refused.value)


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


def cli(*args):
    """`repro ARGS` in its own process (a hang stays in that process: `timeout` guards the test)."""
    return subprocess.run(
        [sys.executable, "-m", "repro", *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("where", ["given", "in the folder"])
def test_a_fifo_is_refused_not_waited_on(tmp_path, where):
    write_log(tmp_path / "logs" / "gpt3large_x.csv", curve(2000))
    fifo = tmp_path / "logs" / "gpt3large_fifo.csv"
    os.mkfifo(fifo)
    if where == "given":
        result = cli("import-audit-log", str(fifo), "--out", str(tmp_path / "run"))
    else:
        result = cli("import-audit-logs", str(tmp_path / "logs"), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and result.stderr.strip() == (
        f"repro: error: {fifo}: not a regular file, so not one of the audit's logs"
    ), result.stderr
    assert not (tmp_path / "run").exists()


def test_a_link_to_a_device_is_refused_unread(tmp_path, capsys):
    (tmp_path / "gpt3large_zero.csv").symlink_to("/dev/zero")
    assert (
        main(
            [
                "import-audit-log",
                str(tmp_path / "gpt3large_zero.csv"),
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    assert "gpt3large_zero.csv: not a regular file" in capsys.readouterr().err


def test_a_log_too_long_to_be_the_audits_is_refused_unread(tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_huge.csv", curve(2000))
    with open(log, "a") as f:
        f.write("#" * (1 << 20))
    assert main(["import-audit-log", str(log), "--out", str(tmp_path / "run")]) == 2
    assert "gpt3large_huge.csv: over 1,048,576 bytes" in capsys.readouterr().err


def test_an_import_never_lands_in_a_training_runs_folder(tiny_baseline_run, tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_x.csv", curve(12, interval=4))
    orphan = tmp_path / "orphan"  # a run whose run.json is gone
    shutil.copytree(tiny_baseline_run, orphan)
    (orphan / "run.json").unlink()
    live = tmp_path / "workflow-run"  # a workflow run still training in live/
    shutil.copytree(tiny_baseline_run, live / "live")
    for out in (orphan, live):
        before = {p: file_sha256(p) for p in out.rglob("*") if p.is_file()}
        assert main(["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"{out}: holds " in err and "refusing to write there" in err
        assert {p: file_sha256(p) for p in out.rglob("*") if p.is_file()} == before
    # An earlier import is replaced.
    again = tmp_path / "imported"
    for _ in range(2):
        assert main(["import-audit-log", str(log), "--preset", "tiny", "--out", str(again)]) == 0


def tiny_log(path, run_dir, offset):
    """An audit log at the tiny preset's evaluation steps: the validation losses of the run in
    run_dir shifted by `offset`."""
    ours = read_run(run_dir).evals()
    rows = [
        (s, ours.at[s, "eval_train_loss"], ours.at[s, "eval_val_loss"] + offset) for s in ours.index
    ]
    return write_log(path, rows)


@pytest.mark.parametrize("offset,verdict", [(0.004, "on course"), (0.5, "off course")])
def test_repro_compare_takes_an_audit_log_as_reference(
    tiny_baseline_run, tmp_path, capsys, offset, verdict
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, offset)
    assert main(["compare", str(tiny_baseline_run), "--reference", str(log)]) == 0
    out = capsys.readouterr().out
    # A log holds losses alone: the verdict cannot claim the configurations are the same.
    unknown = "across configurations (they differ in configuration unknown)"
    assert out.strip().splitlines()[-1].startswith(f"{unknown}: {verdict}")
    assert "(stopped)" in out.splitlines()[0]  # its name says no horizon


def test_repro_compare_is_off_course_where_the_audit_log_diverged(
    tiny_baseline_run, tmp_path, capsys
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, 0.004)
    rows = log.read_text().splitlines()
    log.write_text("\n".join(rows[:-1] + [rows[-1].split(",")[0] + ",nan,nan"]) + "\n")
    assert main(["compare", str(tiny_baseline_run), "--reference", str(log)]) == 0
    out = capsys.readouterr().out
    assert "(diverged)" in out.splitlines()[0]
    assert "off course: the reference diverged at step 12 (the log ends on a non-finite loss" in out


def test_repro_compare_names_what_differs_from_the_stated_configuration(
    tiny_baseline_run, tmp_path, capsys
):
    log = tiny_log(tmp_path / "gpt3large_reference.csv", tiny_baseline_run, 0.004)
    out = tmp_path / "imported"
    stated = {"query_mode": "residual_gelu", "qk_norm": False, "gate": "none", "peak_lr": 6e-4}
    stated |= {"schedule": "cosine", "steps": 12}
    preset = ["--preset", "tiny", "--stated", json.dumps(stated)]
    assert main(["import-audit-log", str(log), "--out", str(out), *preset]) == 0
    assert "(completed its 12-step horizon)" in capsys.readouterr().out
    assert main(["compare", str(tiny_baseline_run), "--reference", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "configurations differ (reference -> run): query_mode: residual_gelu -> linear" in printed
    )
    assert "configuration unknown" not in printed


def test_figure1_draws_an_audit_log_imported_as_an_experiment(tiny_runs, tmp_path):
    log = write_log(
        tmp_path / "gpt3large_plain.csv",
        [(0, 9.9, 10.0), (4, 7.9, 8.0), (8, 5.9, 7.0), (12, 4.9, 5.0)],
    )
    preset, experiments = load_config("tiny")
    audit = tmp_path / "audit" / "tiny"
    record = import_audit_log(log, audit / "baseline", preset, experiments, "baseline")
    assert record.identity["model"]["query_mode"] == "linear"  # the experiment's configuration
    assert json.loads((audit / "baseline" / "run.json").read_text())["data"]["audit_log"] == str(
        log
    )
    fig = plots.figure1(tiny_runs, "tiny", audit_runs_dir=audit)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert "baseline (audit's run)" in labels
    assert "outside the audit's band" in labels  # at step 8, 1 nat above ours


def test_figure1_draws_the_logs_whose_stated_configuration_is_an_experiments(tiny_runs, tmp_path):
    """Logs imported at the figure's preset, each drawn beside the experiment its user stated it
    to be (the diverged one, with fewer rows, too); one nobody stated is counted, not drawn."""
    preset, experiments = load_config("tiny")
    resgelu = resolve_run(preset, experiments["resgelu-lr2.6e-3"]).identity()["optimizer"]
    stated = {
        "gpt3large_resgelu_s0p5_seed43.csv": {"query_mode": "residual_gelu", "peak_lr": 3e-3},
        "gpt3large_resgelu_seed44_diverged.csv": {
            "query_mode": "residual_gelu",
            "peak_lr": resgelu["lr_max"],
        },
        "gpt3small_d2z_lr4p8e3_60k.csv": {"query_mode": "linear", "schedule": "linear"},
        "gpt3large_unknown.csv": {},
    }
    logs = tmp_path / "logs"
    write_log(logs / "gpt3large_resgelu_s0p5_seed43.csv", curve(12, interval=4, start=10, end=4.9))
    write_log(logs / "gpt3large_resgelu_seed44_diverged.csv", curve(8, interval=4, spike_at=8))
    write_log(logs / "gpt3small_d2z_lr4p8e3_60k.csv", curve(12, interval=4, end=5.1))
    write_log(logs / "gpt3large_unknown.csv", curve(12, interval=4, end=5.2))
    imported = tmp_path / "audit" / "logs" / "tiny"
    for name, statement in stated.items():
        command = ["import-audit-log", str(logs / name), "--preset", "tiny", "--stated"]
        out = imported / (logs / name).stem
        assert main([*command, json.dumps(statement), "--out", str(out)]) == 0
    fig = plots.figure1(tiny_runs, "tiny", audit_logs_dir=imported)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    said = "(audit's log, configuration stated by the user)"
    for log, experiment in (
        ("gpt3large_resgelu_s0p5_seed43", "resgelu-lr3e-3"),
        ("gpt3large_resgelu_seed44_diverged", "resgelu-lr2.6e-3"),
    ):
        drawn = lines[f"{log} as {experiment} {said}"]
        assert drawn.get_color() == lines[experiment].get_color()  # beside its experiment
    assert list(lines[f"gpt3large_resgelu_seed44_diverged as resgelu-lr2.6e-3 {said}"].get_xdata())
    assert not any("gpt3small_d2z" in label or "unknown" in label for label in lines)  # no match
    title = fig.axes[0].get_legend().get_title().get_text()
    assert "1 imported log not drawn: configuration unknown" in title


# ---- the workflow: config keys audit_logs and audit_runs ---------------------------------------


TUNED = "gpt3large_linear_qknorm_lr1p5e3_seed43.csv"
TUNED_RUN = {"query_mode": "linear", "qk_norm": True, "peak_lr": 1.5e-3, "steps": 60002}


@pytest.fixture(scope="module")
def audit_workflow(tmp_path_factory):
    """The workflow at the tiny preset given an audit's logs folder, one of whose logs is said to
    be resgelu-lr3e-3, and the dry run of `all` with its shell commands."""
    from workflow_helpers import copy_workflow, snakemake

    root = tmp_path_factory.mktemp("audit-workflow")
    logs = root / "audit's logs"
    write_log(logs / "gpt3large_linear_qknorm_lr1p5e3_seed43.csv", curve(60000))
    write_log(logs / "gpt3large_resgelu_s0p5_seed43.csv", curve(12, interval=4, end=5.0))
    workdir = copy_workflow(root / "wf")
    config = ["--config", "preset=tiny", f"audit_logs={logs}"]
    config.append("audit_runs={resgelu-lr3e-3: gpt3large_resgelu_s0p5_seed43.csv}")
    settings = workdir / "config" / "config.yaml"  # what a user states, in the config file
    text = settings.read_text().replace(
        "audit_configs: {}", f"audit_configs: {{{TUNED}: {json.dumps(TUNED_RUN)}}}"
    )
    assert text != settings.read_text()
    settings.write_text(text)
    plan = snakemake(workdir, "-n", "-p", "--cores", "1", "all", *config)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    return SimpleNamespace(workdir=workdir, logs=logs, config=config, plan=plan.stdout)


def job(plan: str, rule: str) -> str:
    """The part of a dry run's plan that is the job of `rule`."""
    return plan.split(f"rule {rule}:", 1)[1].split("\nrule ", 1)[0]


def test_all_imports_every_log_and_those_said_to_be_ours(audit_workflow):
    plan, logs = audit_workflow.plan, audit_workflow.logs
    folder = shlex.quote(str(logs))  # its name holds a quote
    assert f"repro import-audit-logs {folder} --out results/audit/logs" in job(
        plan, "import_audit_logs"
    )
    log = shlex.quote(str(logs / "gpt3large_resgelu_s0p5_seed43.csv"))
    preset = "config/presets/tiny.yaml"
    assert (
        f"repro import-audit-log {log} --experiment resgelu-lr3e-3 --preset {preset} "
        "--out results/audit/as/tiny/resgelu-lr3e-3" in job(plan, "import_audit_run")
    )


def test_figure1_of_the_workflow_draws_the_logs_said_to_be_ours(audit_workflow):
    figure = job(audit_workflow.plan, "figure1")
    assert "-p audit_runs_dir results/audit/as/tiny" in figure
    assert "results/audit/as/tiny/resgelu-lr3e-3/run.json" in figure  # an input


def test_figure1_of_the_workflow_reads_the_imported_logs_with_their_statements(audit_workflow):
    figure = job(audit_workflow.plan, "figure1")
    assert "-p audit_logs_dir results/audit/logs/tiny" in figure  # where the statements are
    inputs = figure.split("input: ", 1)[1].split("\n", 1)[0].split(", ")
    assert "results/audit/logs" in inputs  # the import of every log, run first


def test_all_compares_our_run_with_the_audits_of_the_same_experiment(audit_workflow):
    command = (
        "repro compare results/runs/tiny/resgelu-lr3e-3 --reference "
        "results/audit/as/tiny/resgelu-lr3e-3 --config-dir config "
        "--csv results/audit/compare/tiny/resgelu-lr3e-3.csv"
    )
    assert command in job(audit_workflow.plan, "compare_audit")


def test_all_puts_the_imported_logs_in_the_evidence_table(audit_workflow):
    command = (
        "repro evidence --preset tiny --runs results/runs/tiny --seeds 1 --config-dir config "
        "--audit-runs results/audit/as/tiny --audit-logs results/audit/logs/tiny "
        "--out results/evidence.csv --html results/evidence.html"
    )
    assert command in job(audit_workflow.plan, "evidence")


@pytest.mark.slow  # Snakemake running the two import jobs, each a `repro` process
def test_the_import_jobs_write_the_runs(audit_workflow):
    from workflow_helpers import snakemake

    workdir, logs = audit_workflow.workdir, audit_workflow.logs
    imported = snakemake(workdir, "--cores", "1", "audit", *audit_workflow.config)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    tuned = read_run(workdir / "results/audit/logs/large/gpt3large_linear_qknorm_lr1p5e3_seed43")
    assert (tuned.record.source, tuned.status) == ("audit", "completed")  # audit_configs' steps
    assert tuned.record.data["stated"] == TUNED_RUN
    ours = read_run(workdir / "results/audit/as/tiny/resgelu-lr3e-3")
    assert (ours.record.source, ours.record.preset, ours.status) == ("audit", "tiny", "completed")
    assert ours.record.identity["model"]["query_mode"] == "residual_gelu"
    assert ours.record.data["audit_log"] == str(logs / "gpt3large_resgelu_s0p5_seed43.csv")


@pytest.mark.parametrize(
    "config,message",
    [
        (["audit_runs={baseline: x.csv}"], "audit_runs names logs, but audit_logs no folder"),
        (["audit_logs=LOGS", "audit_runs={nope: a.csv}"], "audit_runs: unknown experiment 'nope'"),
        (
            ["audit_logs=LOGS", "audit_runs={baseline: gone.csv}"],
            "audit_runs: baseline: no log 'gone.csv' in audit_logs",
        ),
        (["audit_logs=LOGS/a.csv"], "audit_logs: 'LOGS/a.csv' is not a folder"),
        (
            ["audit_logs=LOGS", "audit_runs={baseline: logit_x.csv}"],
            "audit_runs: baseline: 'logit_x.csv' is an attention-logit probe, not a loss log",
        ),
        (
            ["audit_logs=LOGS", "audit_configs={a.csv: {query: linear}}"],
            "audit_configs: a.csv: (top level): unknown key 'query'",
        ),
        (
            ["audit_logs=LOGS", "audit_configs={b.csv: {steps: 12}}"],
            "audit_configs: no log 'b.csv' in audit_logs",
        ),
    ],
)
def test_audit_keys_that_cannot_be_had_stop_the_dag_naming_them(tmp_path, config, message):
    from workflow_helpers import copy_workflow, snakemake

    logs = tmp_path / "logs"
    write_log(logs / "a.csv", curve(12, interval=4))
    write_log(logs / "logit_x.csv", [(0, "4.3", "3.6", "3.5", "4.3")], header="step,L0,L12,L23,max")
    workdir = copy_workflow(tmp_path / "wf")
    message = message.replace("LOGS", str(logs))
    config = [c.replace("LOGS", str(logs)) for c in config]
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "preset=tiny", *config)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and f"Invalid configuration: {message}" in output, output
    assert not (workdir / "results").exists()


@pytest.mark.parametrize("folder", ["results", "results/audit/logs"])
def test_audit_logs_in_the_workflows_own_output_stop_the_dag(tmp_path, folder):
    from workflow_helpers import copy_workflow, snakemake

    workdir = copy_workflow(tmp_path / "wf")
    write_log(workdir / "results/audit/logs/gpt3large_x.csv", curve(12, interval=4))
    result = snakemake(
        workdir, "-n", "--cores", "1", "--config", "preset=tiny", f"audit_logs={folder}"
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert (
        f"Invalid configuration: audit_logs: '{folder}' holds or is within the workflow's output"
        in output
    )
    assert "CyclicGraphException" not in output
