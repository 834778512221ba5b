"""One preset's tables and figures are never replaced by another's: a workflow run at a preset
moves another preset's products in results/ to results/<that preset>/ first (each executed
notebook names the preset it ran at), with a line saying so, and replaces there no file it did
not put there itself (a notebook run by hand writes there too)."""

import json
import os
import shutil
import stat

import pytest
from conftest import random_token_files
from workflow_helpers import copy_workflow, failure, snakemake

from repro.analysis.kept_apart import keep_apart, preset_of
from repro.errors import ReproError


def executed(path, preset):
    """An executed notebook as papermill writes it: its parameters in the metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parameters = {"preset": preset, "runs_dir": f"results/runs/{preset}"}
    path.write_text(
        json.dumps({"cells": [], "metadata": {"papermill": {"parameters": parameters}}})
    )


def products(results, preset, name="table1"):
    """A notebook rule's products as the workflow leaves them; the group keep_apart is given."""
    notebook = results / "notebooks" / f"{name}.ipynb"
    executed(notebook, preset)
    (results / f"{name}.csv").write_text(f"experiment,preset\nbaseline,{preset}\n")
    return {str(notebook): [str(results / f"{name}.csv"), str(notebook)]}  # as common.smk's


def test_another_presets_products_move_to_its_folder_and_this_ones_stay(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke") | products(results, "tiny", "figure1")
    said = keep_apart(groups, "tiny", results)
    assert said == [
        f"{results}/: preset smoke's table1 moved to {results}/smoke/ (this run is preset tiny's)"
    ]
    assert "baseline,smoke" in (results / "smoke" / "table1.csv").read_text()
    assert (results / "smoke" / "notebooks" / "table1.ipynb").is_file()
    assert not (results / "table1.csv").exists()
    assert "baseline,tiny" in (results / "figure1.csv").read_text()  # this preset's: in place


@pytest.mark.parametrize("notebook", ["{not json", "[]", '{"metadata": {}}', "fifo"])
def test_a_notebook_that_names_no_preset_leaves_its_products_in_place(tmp_path, notebook):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    path = results / "notebooks" / "table1.ipynb"
    path.unlink()
    if notebook == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(notebook)
    [said] = keep_apart(groups, "tiny", results)
    assert said.startswith(f"{path}: ")
    assert said.endswith(f"its products stay in {results}/ (a run may replace them)")
    assert (results / "table1.csv").is_file() and not (results / "smoke").exists()


def tree(folder):
    """Every path under `folder` with its bytes (a link: its target's name; a pipe: None)."""
    return {
        str(p.relative_to(folder)): os.readlink(p)
        if p.is_symlink()
        else p.read_bytes()
        if p.is_file()
        else None
        for p in sorted(folder.rglob("*"))
    }


def test_a_table_made_by_hand_where_the_move_goes_is_kept_and_the_incoming_one_beside_it(
    tmp_path,
):
    results = tmp_path / "results"
    keep_apart(products(results, "smoke"), "tiny", results)  # smoke's first table, moved
    by_hand = results / "smoke" / "table1.csv"
    by_hand.write_text("experiment,preset\nmine,smoke\n")  # the notebook run by hand there
    said = keep_apart(products(results, "smoke"), "tiny", results)  # smoke's again, moved
    assert by_hand.read_text() == "experiment,preset\nmine,smoke\n"
    beside = results / "smoke" / "table1.workflow.csv"
    assert "baseline,smoke" in beside.read_text()
    assert not (results / "table1.csv").exists()
    assert said[0] == (
        f"{by_hand}: not the workflow's (a notebook run by hand?), left as it is; "
        f"{results}/table1.csv kept beside it as {beside}"
    )
    keep_apart(products(results, "smoke"), "tiny", results)  # and again: a name not taken
    assert (results / "smoke" / "table1.workflow-2.csv").is_file()
    assert by_hand.read_text() == "experiment,preset\nmine,smoke\n"


def test_a_file_the_move_put_there_is_replaced_by_the_next(tmp_path):
    results = tmp_path / "results"
    keep_apart(products(results, "smoke"), "tiny", results)
    groups = products(results, "smoke")
    (results / "table1.csv").write_text("experiment,preset\nbaseline-2,smoke\n")  # rebuilt
    assert keep_apart(groups, "tiny", results) == [
        f"{results}/: preset smoke's table1 moved to {results}/smoke/ (this run is preset tiny's)"
    ]
    assert "baseline-2" in (results / "smoke" / "table1.csv").read_text()
    assert not (results / "smoke" / "table1.workflow.csv").exists()


@pytest.mark.parametrize("record", ["{not json", "[]", '{"smoke/table1.csv": 5}', "fifo"])
def test_a_damaged_record_replaces_nothing(tmp_path, record):
    results = tmp_path / "results"
    keep_apart(products(results, "smoke"), "tiny", results)
    path = results / ".kept_apart.json"
    path.unlink()
    if record == "fifo":
        os.mkfifo(path)
    else:
        path.write_text(record)
    (results / "smoke" / "table1.csv").write_text("the first, unrecorded\n")
    groups = products(results, "smoke")
    if record == "fifo":  # a record that cannot be written: no move unrecorded
        with pytest.raises(ReproError, match=f"^{path}: a named pipe, not a file"):
            keep_apart(groups, "tiny", results)
    else:
        keep_apart(groups, "tiny", results)
    assert (results / "smoke" / "table1.csv").read_text() == "the first, unrecorded\n"
    assert "baseline,smoke" in (results / "smoke" / "table1.workflow.csv").read_text()


def test_a_file_with_the_incoming_bytes_is_replaced(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    (results / "smoke").mkdir()
    (results / "smoke" / "table1.csv").write_bytes((results / "table1.csv").read_bytes())
    keep_apart(groups, "tiny", results)
    assert "baseline,smoke" in (results / "smoke" / "table1.csv").read_text()
    assert sorted(p.name for p in (results / "smoke").iterdir()) == ["notebooks", "table1.csv"]


@pytest.mark.parametrize("kind", ["symlink", "folder", "fifo", "dangling symlink"])
def test_no_file_of_another_kind_is_replaced(tmp_path, kind):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    target = results / "smoke" / "table1.csv"
    target.parent.mkdir()
    outside = tmp_path / "outside.csv"
    outside.write_text("not in results/\n")
    {
        "symlink": lambda: target.symlink_to(outside),
        "dangling symlink": lambda: target.symlink_to(tmp_path / "nowhere"),
        "folder": lambda: (target.mkdir(), (target / "mine").write_text("mine\n")),
        "fifo": lambda: os.mkfifo(target),
    }[kind]()
    before = tree(target) if kind == "folder" else None
    said = keep_apart(groups, "tiny", results)
    assert "kept beside it as" in said[0] and len(said) == 2
    assert "baseline,smoke" in (results / "smoke" / "table1.workflow.csv").read_text()
    assert outside.read_text() == "not in results/\n"
    assert not (tmp_path / "nowhere").exists()
    assert target.is_symlink() == ("symlink" in kind)
    assert kind != "fifo" or stat.S_ISFIFO(os.lstat(target).st_mode)
    assert kind != "folder" or tree(target) == before


def test_a_file_where_the_presets_folder_goes_stops_the_move_in_one_line(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    (results / "smoke").write_text("a file of mine\n")
    with pytest.raises(ReproError, match=r"results/smoke: exists and is not a directory"):
        keep_apart(groups, "tiny", results)
    assert (results / "smoke").read_text() == "a file of mine\n"
    assert (results / "table1.csv").is_file() and (results / "notebooks" / "table1.ipynb").is_file()


def test_a_missing_product_is_skipped_and_a_second_move_does_nothing(tmp_path):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    groups[str(results / "notebooks" / "table1.ipynb")] += [str(results / "table1.html")]
    keep_apart(groups, "tiny", results)
    assert not (results / "smoke" / "table1.html").exists()
    before = tree(tmp_path)
    assert keep_apart(groups, "tiny", results) == []
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "preset", ["..", ".", "", "../..", "/tmp", "a/b", "a\\b", "a\0b", 5, None, ["smoke"]]
)
def test_a_notebook_whose_preset_is_no_name_moves_nothing_in_one_line(tmp_path, preset):
    results = tmp_path / "results"
    groups = products(results, "smoke")
    executed(results / "notebooks" / "table1.ipynb", preset)
    before = tree(tmp_path)
    said = keep_apart(groups, "tiny", results)
    assert said == [
        f"{results}/notebooks/table1.ipynb: preset {preset!r} is not a preset's name (a folder "
        f"name): its products stay in {results}/ (a run may replace them)"
    ]
    assert tree(tmp_path) == before


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


@pytest.mark.slow  # Snakemake trains Table 1's runs at tiny and runs its notebook twice
def test_presets_switched_back_and_forth_replace_nothing_a_notebook_run_by_hand_wrote(tmp_path):
    papermill = pytest.importorskip("papermill")
    workdir = copy_workflow(tmp_path / "workflow")
    presets = workdir / "config" / "presets"
    shutil.copy(presets / "tiny.yaml", presets / "tiny2.yaml")  # a second preset, as cheap
    random_token_files(workdir / "data" / "python-docs")  # no corpus to prepare
    results = workdir / "results"

    def run(preset, *targets):
        result = snakemake(workdir, "--cores", "2", *targets, "--config", f"preset={preset}")
        assert result.returncode == 0, failure(result)
        return result.stdout + result.stderr

    run("tiny", "results/table1.csv")
    other = ["data/python-docs/indices/tiny2/indices.json", "--forcerun", "indices"]
    assert "preset tiny's table1 moved to results/tiny/" in run("tiny2", *other)
    moved = tree(results / "tiny")
    papermill.execute_notebook(  # by hand, as a user keeps its executed copy: results/tiny/
        str(workdir / "notebooks" / "table1.ipynb"),
        str(results / "tiny" / "notebooks" / "table1.ipynb"),
        parameters={"preset": "tiny"},
        cwd=str(workdir / "notebooks"),
        progress_bar=False,
        engine_name="repro",
    )
    by_hand = {p: data for p, data in tree(results / "tiny").items() if moved.get(p) != data}
    assert "notebooks/table1.ipynb" in by_hand  # papermill's times in it: not the workflow's

    run("tiny", "results/table1.csv")  # back at tiny: results/table1.csv rebuilt
    said = run("tiny2", *other)  # and off again: tiny's moved once more
    now = tree(results / "tiny")
    assert {path: now.get(path) for path in by_hand} == by_hand
    beside = "results/tiny/notebooks/table1.workflow.ipynb"
    assert f"results/notebooks/table1.ipynb kept beside it as {beside}" in said
    assert preset_of(workdir / beside) == "tiny" and not (results / "table1.csv").exists()
