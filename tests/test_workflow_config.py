"""Bad input stops the workflow before any job runs, with a message naming the key or path."""

import pytest

from workflow_helpers import copy_workflow, snakemake


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return copy_workflow(tmp_path_factory.mktemp("workflow"))


def assert_stopped(result, workdir, *phrases):
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    for phrase in phrases:
        assert phrase in output, output
    assert not (workdir / "data").exists() and not (workdir / "results").exists(), "a job ran"


def test_dry_run_of_the_default_config(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "all")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train" in result.stdout and "table1" in result.stdout


def test_unknown_preset(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "preset=huge")
    assert_stopped(result, workdir, "unknown preset 'huge'")


def test_unknown_experiment_in_config(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "extra_experiments=[nope]")
    assert_stopped(result, workdir, "unknown experiment 'nope'")


def test_unknown_experiment_as_target(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "results/runs/smoke/nope/metrics.csv")
    assert_stopped(result, workdir, "unknown experiment 'nope'")


def test_unknown_preset_as_target(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "results/runs/huge/baseline/metrics.csv")
    assert_stopped(result, workdir, "unknown preset 'huge'")


def test_value_of_the_wrong_type(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "train_threads=two")
    assert_stopped(result, workdir, "train_threads")


def test_unknown_key(workdir):
    result = snakemake(workdir, "-n", "--cores", "1", "--config", "prest=paper")
    assert_stopped(result, workdir, "prest")


def test_missing_corpus(workdir, tmp_path):
    config = tmp_path / "paper.yaml"
    config.write_text(f"preset: paper\nopenwebtext:\n  data_files: {tmp_path}/owt/*.parquet\n")
    result = snakemake(workdir, "-n", "--cores", "1", "--configfile", str(config))
    assert_stopped(result, workdir, "openwebtext.data_files", f"{tmp_path}/owt/*.parquet")
