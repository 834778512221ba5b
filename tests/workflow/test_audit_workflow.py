"""The workflow given the audit's logs (config keys audit_logs, audit_runs, audit_configs): the
dry run of `all` imports every log, draws and compares those said to be ours and puts them in the
evidence table; keys that cannot be had stop the DAG naming them."""

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from audit_helpers import curve, write_log
from conftest import REPO

from repro.analysis.runs import read_run
from repro.config import load_experiments

TUNED = "gpt3large_linear_qknorm_lr1p5e3_seed43.csv"
TUNED_RUN = {"query_mode": "linear", "qk_norm": True, "peak_lr": 1.5e-3, "steps": 60002}


@pytest.fixture(scope="module")
def audit_workflow(tmp_path_factory):
    """The workflow at the tiny preset given an audit's logs folder, one of whose logs is said to
    be resgelu-lr3e-3, and the dry run of `all` with its shell commands."""
    from workflow_helpers import copy_workflow, snakemake_in_process

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
    plan = snakemake_in_process(workdir, "-n", "-p", "--cores", "1", "all", *config)
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


# The workflow stops on these keys through repro's check before any job (its message prefixed
# "Invalid configuration: "): each key is checked here by that check, and one dry run below shows
# a bad key stopping the DAG.
@pytest.mark.parametrize(
    "keys,message",
    [
        ({"runs": {"baseline": "x.csv"}}, "audit_runs names logs, but audit_logs no folder"),
        ({"logs": "LOGS", "runs": {"nope": "a.csv"}}, "audit_runs: unknown experiment 'nope'"),
        (
            {"logs": "LOGS", "runs": {"baseline": "gone.csv"}},
            "audit_runs: baseline: no log 'gone.csv' in audit_logs",
        ),
        ({"logs": "LOGS/a.csv"}, "audit_logs: 'LOGS/a.csv' is not a folder"),
        (
            {"logs": "LOGS", "runs": {"baseline": "logit_x.csv"}},
            "audit_runs: baseline: 'logit_x.csv' is an attention-logit probe, not a loss log",
        ),
        (
            {"logs": "LOGS", "stated": {"logit_x.csv": {"steps": 12}}},
            "audit_configs: 'logit_x.csv' is an attention-logit probe, not a loss log",
        ),
        (
            {"logs": "LOGS", "stated": {"a.csv": {"query": "linear"}}},
            "audit_configs: a.csv: (top level): unknown key 'query'",
        ),
        (
            {"logs": "LOGS", "stated": {"b.csv": {"steps": 12}}},
            "audit_configs: no log 'b.csv' in audit_logs",
        ),
        ({"logs": "RESULTS"}, "audit_logs: 'RESULTS' holds or is within the workflow's output"),
        (
            {"logs": "RESULTS/audit/logs"},
            "audit_logs: 'RESULTS/audit/logs' holds or is within the workflow's output",
        ),
    ],
)
def test_audit_keys_that_cannot_be_had_are_named(tmp_path, keys, message):
    from repro.annex.authors.audit_log import AuditError, check_workflow_keys

    logs, results = tmp_path / "logs", tmp_path / "wf" / "results"
    write_log(logs / "a.csv", curve(12, interval=4))
    write_log(logs / "logit_x.csv", [(0, "4.3", "3.6", "3.5", "4.3")], header="step,L0,L12,L23,max")
    write_log(results / "audit/logs/gpt3large_x.csv", curve(12, interval=4))

    def placed(text: str) -> str:
        return text.replace("LOGS", str(logs)).replace("RESULTS", str(results))

    experiments = load_experiments(None, REPO / "config")
    with pytest.raises(AuditError) as refused:
        check_workflow_keys(
            placed(keys.get("logs", "")),
            keys.get("runs", {}),
            keys.get("stated", {}),
            experiments,
            results,
        )
    assert placed(message) in str(refused.value), str(refused.value)


def test_audit_logs_in_the_workflows_own_output_stop_the_dag(tmp_path):
    from workflow_helpers import copy_workflow, snakemake_in_process

    workdir = copy_workflow(tmp_path / "wf")
    write_log(workdir / "results/audit/logs/gpt3large_x.csv", curve(12, interval=4))
    folder = "results/audit/logs"
    result = snakemake_in_process(
        workdir, "-n", "--cores", "1", "--config", "preset=tiny", f"audit_logs={folder}"
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert (
        f"Invalid configuration: audit_logs: '{folder}' holds or is within the workflow's output"
        in output
    )
    assert "CyclicGraphException" not in output
    written = [p.relative_to(workdir) for p in (workdir / "results").rglob("*") if p.is_file()]
    assert written == [Path("results/audit/logs/gpt3large_x.csv")], "a job ran"
