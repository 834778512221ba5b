"""The training jobs' GPUs in the workflow: gpus_per_run `gpu` resources per GPU run, torchrun
for gpus_per_run above 1."""

import re

import pytest
from workflow_helpers import copy_workflow, snakemake_in_process

TARGET = "results/runs/paper/baseline/metrics.csv"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("workflow"))


def train_job(workdir, *args):
    """The resources and shell command of the paper baseline's training job (dry run)."""
    result = snakemake_in_process(workdir, "-n", "-p", "--cores", "8", *args, "--", TARGET)
    assert result.returncode == 0, result.stdout + result.stderr
    job = result.stdout[result.stdout.index("rule train:") :]
    resources = re.search(r"resources: (.*)", job).group(1)
    command = re.search(r"Shell command: (.*)", job).group(1)
    return resources, command


def test_a_gpu_run_claims_one_gpu_and_runs_repro_train(workdir):
    resources, command = train_job(workdir, "--resources", "gpu=4", "--config", "preset=paper")
    assert "gpu=1" in resources
    assert command.startswith("exec repro train --preset config/presets/paper.yaml")


def test_gpus_per_run_launches_torchrun_and_claims_as_many(workdir):
    resources, command = train_job(
        workdir, "--resources", "gpu=4", "--config", "preset=paper", "gpus_per_run=2"
    )
    assert "gpu=2" in resources
    assert command.startswith(
        "exec torchrun --standalone --nproc_per_node 2 -m repro train --preset"
    )


def test_a_cpu_preset_claims_no_gpu(default_plan):
    jobs = default_plan.stdout.split("rule train:")[1:]  # the default preset's, smoke
    assert jobs and all("gpu=0" in re.search(r"resources: (.*)", job).group(1) for job in jobs)
