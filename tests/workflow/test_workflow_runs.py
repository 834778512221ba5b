"""The workflow notices what users do: a deleted run folder is retrained and the tables rebuilt;
paths with spaces work. A scratch copy of the workflow, on ready-made token files (no corpus
preparation), trains one tiny run."""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import random_token_files, read_metrics, without_timing
from hang_guard import watch
from preemption_helpers import checkpoint_differences
from workflow_helpers import copy_workflow, snakemake, snakemake_env

from repro.analysis.results import table1_experiments
from repro.config import load_experiments, load_preset

pytestmark = pytest.mark.slow  # Snakemake trains a run
CONFIG = ["--cores", "2", "--config", "preset=tiny", "data_dir=my data"]
MAIN_OUTPUTS = [
    "results/table1.csv",
    "results/table1.html",
    "results/claims.csv",
    "results/claims.html",
    "results/notebooks/table1.ipynb",
    "results/figures/figure1.png",
    "results/figures/figure1.pdf",
    "results/figures/figure1.html",
    "results/notebooks/figure1.ipynb",
    "results/notebooks/explore.ipynb",
]
# the runs `main` reads at tiny: Table 1's and the linear query at the nonlinear query's rate
TABLE1 = [e.name for e in table1_experiments(load_preset("tiny"), load_experiments())]


BASELINE = "results/runs/tiny/baseline"


def new_workflow(folder):
    """A scratch copy of the workflow with its token files."""
    workdir = copy_workflow(folder)
    random_token_files(workdir / "my data" / "python-docs")
    return workdir


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    workdir = new_workflow(tmp_path_factory.mktemp("workflow"))
    result = snakemake(workdir, f"{BASELINE}/run.json", *CONFIG)
    assert result.returncode == 0, result.stdout + result.stderr
    return workdir


def test_paths_with_spaces_work(built):
    runs = built / "results" / "runs" / "tiny" / "baseline"
    assert (runs / "run.json").exists() and (runs / "metrics.csv").exists()
    assert (built / "my data" / "python-docs" / "indices" / "tiny" / "indices.json").exists()
    assert not (built / "my").exists() and not (built / "data").exists()  # no stray files


def test_a_deleted_run_folder_is_retrained_and_the_tables_rebuilt(built):
    runs = built / "results" / "runs" / "tiny"
    for name in TABLE1[1:]:  # stand-ins for the other runs: a dry run reads no content
        shutil.copytree(runs / "baseline", runs / name, dirs_exist_ok=True)
    time.sleep(1.1)
    for path in MAIN_OUTPUTS:  # stand-ins for the outputs of `main`, newer than the runs
        (built / path).parent.mkdir(parents=True, exist_ok=True)
        (built / path).write_text("built after the runs\n")
    before = snakemake(built, "-n", "main", *CONFIG)
    assert "Nothing to be done" in before.stdout + before.stderr, before.stdout + before.stderr

    shutil.rmtree(runs / "mlp4.75")  # the README's way to retrain a run
    after = snakemake(built, "-n", "main", *CONFIG)
    output = after.stdout + after.stderr
    assert after.returncode == 0, output
    assert "results/runs/tiny/mlp4.75/run.json" in output and "rule table1:" in output, output
    assert "rule figure1:" in output, output


def test_a_workflow_stopped_while_it_trains_ends_as_one_never_stopped(built, tmp_path):
    """Snakemake stopped at a step drawn at random (REPRO_TEST_STOP_SEED draws another) by Ctrl-C
    or a scheduler's time limit (SIGINT or SIGTERM to its process group, the trainer in it):
    asked again, it trains the run on from its checkpoint to the uninterrupted workflow's run.
    (SIGTERM to Snakemake alone stops nothing: it waits for its running jobs to finish.)"""
    rng = random.Random(f"{os.environ.get('REPRO_TEST_STOP_SEED', '0')}:workflow")
    signum, step = rng.choice([signal.SIGINT, signal.SIGTERM]), rng.randrange(9)
    said = f"stopped by {signal.Signals(signum).name} at step {step}"
    workdir = new_workflow(tmp_path / "workflow")
    job_log = workdir / BASELINE / "train.log"  # what `repro train` prints
    with open(tmp_path / "snakemake.log", "w") as log:
        workflow = subprocess.Popen(
            [sys.executable, "-m", "snakemake", f"{BASELINE}/run.json", *CONFIG],
            cwd=workdir,
            env=snakemake_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 600
        while not (job_log.exists() and f"step {step}/" in job_log.read_text()):
            assert workflow.poll() is None and time.monotonic() < deadline, said
            time.sleep(0.02)  # a tiny step takes a tenth of a second: look often
        os.killpg(workflow.pid, signum)  # as a terminal's Ctrl-C and a job's time limit do
        watch(workflow, said)
    said += "\n" + (tmp_path / "snakemake.log").read_text() + job_log.read_text()
    assert workflow.returncode != 0 and "stopped by SIG" in job_log.read_text(), said
    assert not (workdir / BASELINE / "run.json").exists(), said  # nothing published

    again = snakemake(workdir, f"{BASELINE}/run.json", *CONFIG)
    assert again.returncode == 0, said + again.stdout + again.stderr
    assert "resuming at step" in job_log.read_text(), said
    assert without_timing(read_metrics(workdir / BASELINE)) == without_timing(
        read_metrics(built / BASELINE)
    )
    live = f"{BASELINE}/live/ckpt.pt"
    assert not checkpoint_differences(workdir / live, built / live)
