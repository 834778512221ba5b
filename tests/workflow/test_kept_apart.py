"""One preset's tables and figures are never replaced by another's: a workflow run at a preset
moves another preset's products in results/ to results/<that preset>/ first (each executed
notebook names the preset it ran at), with a line saying so."""

import json

import pytest
from workflow_helpers import copy_workflow, snakemake

from repro.analysis.kept_apart import keep_apart


def executed(path, preset):
    """An executed notebook as papermill writes it: its parameters in the metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parameters = {"preset": preset, "runs_dir": f"results/runs/{preset}"}
    path.write_text(
        json.dumps({"cells": [], "metadata": {"papermill": {"parameters": parameters}}})
    )


def products(results, preset, name="table1"):
    executed(results / "notebooks" / f"{name}.ipynb", preset)
    (results / f"{name}.csv").write_text(f"experiment,preset\nbaseline,{preset}\n")
    return {str(results / "notebooks" / f"{name}.ipynb"): [str(results / f"{name}.csv")]}


def test_another_presets_products_move_to_its_folder_and_this_ones_stay(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke") | products(results, "tiny", "figure1")
    for files in groups.values():  # the notebook is one of its rule's products
        files.append(files[0].replace(".csv", ".ipynb").replace("results/", "results/notebooks/"))
    said = keep_apart(groups, "tiny", results)
    assert said == [
        f"{results}/: preset smoke's table1 moved to {results}/smoke/ (this run is preset tiny's)"
    ]
    assert "baseline,smoke" in (results / "smoke" / "table1.csv").read_text()
    assert (results / "smoke" / "notebooks" / "table1.ipynb").is_file()
    assert not (results / "table1.csv").exists()
    assert "baseline,tiny" in (results / "figure1.csv").read_text()  # this preset's: in place


def test_a_notebook_that_names_no_preset_leaves_its_products_in_place(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    (results / "notebooks" / "table1.ipynb").write_text("{not json")
    assert keep_apart(groups, "tiny", results) == []
    assert (results / "table1.csv").is_file()


@pytest.mark.slow  # a workflow run: the tiny corpus prepared, one run trained
def test_a_run_at_another_preset_keeps_the_earlier_presets_table(tmp_path):
    workdir = copy_workflow(tmp_path / "workflow")
    products(workdir / "results", "smoke")  # as a smoke run of the workflow left them
    target = "results/runs/tiny/baseline/metrics.csv"
    result = snakemake(workdir, "--cores", "1", target, "--config", "preset=tiny")
    assert result.returncode == 0, result.stderr
    said = "results/: preset smoke's table1 moved to results/smoke/ (this run is preset tiny's)"
    assert said in result.stdout + result.stderr
    assert "baseline,smoke" in (workdir / "results" / "smoke" / "table1.csv").read_text()
    assert not (workdir / "results" / "table1.csv").exists()
