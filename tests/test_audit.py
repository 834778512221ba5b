"""The audit's logs (repro.authors.audit): its neurreps_writeup/logs/ CSVs, written here in its
format (`step,train_loss,val_loss`, one row per evaluation, losses to 4 decimals; attention-logit
probes `step,L0,L12,L23,max` beside them), imported read-only as run directories, refused in one
line when malformed, and shown by `repro compare` and in Figure 1."""

import json
import shlex
from types import SimpleNamespace

import matplotlib
import pytest
from conftest import train_args

matplotlib.use("Agg")

from repro.analysis import plots
from repro.analysis.results import read_run
from repro.authors.audit import AuditError, import_audit_log, import_audit_logs, read_audit_log
from repro.cli import main
from repro.config import load_config
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
    assert "4 runs of the audit imported" in capsys.readouterr().out
    assert {p.name: file_sha256(p) for p in logs.iterdir()} == before  # the folder is only read
    assert sorted(p.name for p in (out / "large").iterdir()) == [
        "gpt3large_linear_plain_seed43_diverged",
        "gpt3large_linear_qknorm_lr1p5e3_seed43",
        "gpt3large_resgelu_s0p5_seed45",
    ]
    assert [p.name for p in (out / "paper").iterdir()] == ["gpt3small_d2z_lr2p4e3_60k"]
    tuned = read_run(out / "large" / "gpt3large_linear_qknorm_lr1p5e3_seed43")
    assert (tuned.status, tuned.record.source, tuned.record.preset) == (
        "completed",
        "audit",
        "large",
    )
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
    ],
)
def test_a_malformed_log_is_refused_naming_its_line_and_column(tmp_path, content, message):
    log = tmp_path / "gpt3large_x.csv"
    log.write_text(content)
    with pytest.raises(AuditError, match=message) as refused:
        read_audit_log(log)
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
    unknown = "across configurations (they differ in the reference records no configuration)"
    assert out.strip().splitlines()[-1].startswith(f"{unknown}: {verdict}")
    assert "(completed)" in out.splitlines()[0]


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


# ---- the workflow: config keys audit_logs and audit_runs ---------------------------------------


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


def test_all_compares_our_run_with_the_audits_of_the_same_experiment(audit_workflow):
    command = (
        "repro compare results/runs/tiny/resgelu-lr3e-3 --reference "
        "results/audit/as/tiny/resgelu-lr3e-3 --config-dir config "
        "--csv results/audit/compare/tiny/resgelu-lr3e-3.csv"
    )
    assert command in job(audit_workflow.plan, "compare_audit")


@pytest.mark.slow  # Snakemake running the two import jobs, each a `repro` process
def test_the_import_jobs_write_the_runs(audit_workflow):
    from workflow_helpers import snakemake

    workdir, logs = audit_workflow.workdir, audit_workflow.logs
    imported = snakemake(workdir, "--cores", "1", "audit", *audit_workflow.config)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    tuned = read_run(workdir / "results/audit/logs/large/gpt3large_linear_qknorm_lr1p5e3_seed43")
    assert (tuned.record.source, tuned.status) == ("audit", "completed")
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
    ],
)
def test_audit_runs_that_cannot_be_had_stop_the_dag_naming_them(tmp_path, config, message):
    from workflow_helpers import copy_workflow, snakemake

    logs = tmp_path / "logs"
    write_log(logs / "a.csv", curve(12, interval=4))
    workdir = copy_workflow(tmp_path / "wf")
    config = [c.replace("LOGS", str(logs)) for c in config]
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "preset=tiny", *config)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and f"Invalid configuration: {message}" in output, output
    assert not (workdir / "results").exists()
