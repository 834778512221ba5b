"""The workflow with the authors' artefacts (config key authors_artefacts): their runs imported,
their checkpoints evaluated on our indices, their runs beside ours in Table 1 and the figures."""

import json
import re
import shlex

import pandas as pd
import pytest
from authors_helpers import write_artefacts
from workflow_helpers import copy_workflow, failure, snakemake, snakemake_in_process

from repro.analysis import plots, results
from repro.annex.authors.runs import import_authors_run
from repro.cli import assembly as cli
from repro.config import load_config, resolve_run

HOSTILE = "my $(touch PWNED) drive"
TABLE1 = ["baseline", "mlp4.75", "mlp4.75-scaled", "resgelu-lr2.6e-3", "resgelu-lr3e-3"]


def artefacts(root, names=TABLE1):
    preset, experiments = load_config("tiny")
    return write_artefacts(root, {n: resolve_run(preset, experiments[n]) for n in names})


@pytest.fixture
def imported(tmp_path):
    """The authors' Table 1 runs at the tiny scale, imported."""
    preset, experiments = load_config("tiny")
    folder = artefacts(tmp_path / "artefacts")
    runs = tmp_path / "authors" / "tiny"
    for name in TABLE1:
        source = experiments[name].source.split("/")
        import_authors_run(
            folder / f"out_config_{source[0]}w_{source[1]}", runs / name, preset, experiments
        )
    return runs


def test_table1_gains_the_authors_columns(tiny_runs, imported):
    table = results.table1(tiny_runs, "tiny", authors_runs_dir=imported)
    status = dict(zip(table["experiment"], table["authors_status"]))
    # the linear query at the nonlinear query's rate (the small presets' equal-rate arm) is ours
    assert status == {**dict.fromkeys(TABLE1, "completed"), "baseline-wd3.125e-2-lr3e-3": "missing"}
    assert table["authors_val_loss"].iloc[0] == pytest.approx(5.5)
    assert table["authors_rel_improvement"].iloc[1] == pytest.approx(0.1 / 5.5)
    assert "authors_val_loss" not in results.table1(tiny_runs, "tiny").columns


def test_figures_draw_the_authors_runs_beside_ours(tiny_runs, imported):
    for figure in (plots.figure1, plots.figure2):
        ours = figure(tiny_runs, "tiny")
        both = figure(tiny_runs, "tiny", authors_runs_dir=imported)
        labels = [t.get_text() for t in both.axes[0].get_legend().get_texts()]
        theirs = [label for label in labels if label.endswith(" (authors' run)")]
        assert any(label.startswith("resgelu-lr3e-3") for label in theirs), labels
        assert len(both.axes[0].lines) > len(ours.axes[0].lines)


@pytest.mark.slow  # authors_workflow: Snakemake running the job that finds their runs
def test_the_workflow_adds_the_authors_targets(authors_workflow, tmp_path):
    workdir, folder = authors_workflow.workdir, authors_workflow.folder
    (runs,) = (workdir / "results/authors/found").glob("*.json")
    assert list(json.loads(runs.read_text())) == authors_workflow.names == TABLE1[:2]
    result = authors_workflow.dry_run
    out = result.stdout + result.stderr
    for job in ("import_authors_run", "evaluate_authors_checkpoint", "authors_table1"):
        assert job in out, out
    assert "results/authors/runs/tiny/mlp4.75/metrics.csv" in out
    commands = re.findall(r"^Shell command: (.+)$", result.stdout, re.M)
    for command in commands:  # as the shell splits it: the folder's path stays one word
        hostile = [w for w in shlex.split(command) if "PWNED" in w]
        assert command.count("PWNED") == len(hostile), command
        assert all(w.startswith(str(folder)) for w in hostile), command
    assert sum("PWNED" in c for c in commands) == 4 + 2  # 4 evaluations, 2 imports
    assert not list(authors_workflow.root.rglob("PWNED"))
    missing = snakemake_in_process(
        workdir, "-n", "--cores", "1", "--config", f"authors_artefacts={tmp_path / 'nowhere'}"
    )
    assert missing.returncode != 0 and "nowhere" in missing.stdout + missing.stderr


@pytest.mark.slow
def test_the_authors_table_is_recomputed_from_their_checkpoints(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    folder = artefacts(tmp_path / HOSTILE, TABLE1[:2])  # a folder name with shell code
    result = snakemake(
        workdir,
        "results/authors/table1.csv",
        "--cores",
        "2",
        "--config",
        "preset=tiny",
        f"authors_artefacts={folder}",
        f"data_dir={HOSTILE}",
    )
    assert result.returncode == 0, failure(result)
    assert not list(tmp_path.rglob("PWNED"))  # the shell ran no code from a path
    table = pd.read_csv(workdir / "results" / "authors" / "table1.csv")
    assert list(table["experiment"]) == TABLE1[:2]
    assert list(table["checkpoint_step"]) == [12, 12] and list(table["table_step"]) == [12, 12]
    assert table["logged_val_loss_at_table_step"].iloc[0] == pytest.approx(5.5)
    assert table["val_loss_at_table_step"].notna().all()
    assert table["paper_val_loss"].iloc[0] == 2.956


def test_authors_runs_names_a_missing_folder_in_one_line(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert cli.main(["authors-runs", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error == f"repro: error: authors_artefacts: {tmp_path / 'nowhere'}: not a folder"
    assert not out.exists()


@pytest.mark.slow  # authors_workflow
def test_the_workflow_compares_each_run_with_the_authors(authors_workflow):
    """`all` compares our runs with theirs of the same configuration (compare.smk)."""
    out = authors_workflow.dry_run.stdout + authors_workflow.dry_run.stderr
    for name in authors_workflow.names:
        assert f"results/authors/compare/tiny/{name}.csv" in out
    assert (
        "repro compare results/runs/tiny/mlp4.75 --reference results/authors/runs/tiny/mlp4.75"
        in out
    )
    assert "results/authors/compare/tiny/resgelu-lr3e-3.csv" not in out  # none of theirs
