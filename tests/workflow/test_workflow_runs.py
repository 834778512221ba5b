"""The workflow notices what users do: a deleted run folder is retrained and the tables rebuilt;
paths with spaces work. A scratch copy of the workflow, on ready-made token files (no corpus
preparation), trains one tiny run."""

import shutil
import time

import pytest
from conftest import random_token_files
from workflow_helpers import copy_workflow, snakemake

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


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    random_token_files(workdir / "my data" / "python-docs")
    result = snakemake(workdir, "results/runs/tiny/baseline/run.json", *CONFIG)
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
