"""The workflow with the authors' artefacts (config key authors_artefacts): their runs imported,
their checkpoints evaluated on our indices, their runs beside ours in Table 1 and the figures."""

import pandas as pd
import pytest
from authors_helpers import write_artefacts
from workflow_helpers import copy_workflow, snakemake

from repro.analysis import plots, results
from repro.authors.runs import import_authors_run
from repro.config import load_config, resolve_run

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
    assert list(table["authors_status"]) == ["completed"] * 5
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


def test_the_workflow_adds_the_authors_targets(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    folder = artefacts(tmp_path / "artefacts", TABLE1[:2])
    result = snakemake(
        workdir,
        "-n",
        "--cores",
        "1",
        "all",
        "--config",
        "preset=tiny",
        f"authors_artefacts={folder}",
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for job in ("import_authors_run", "evaluate_authors_checkpoint", "authors_table1"):
        assert job in out, out
    assert "results/authors/runs/tiny/mlp4.75/metrics.csv" in out
    missing = snakemake(
        workdir, "-n", "--cores", "1", "--config", f"authors_artefacts={tmp_path / 'nowhere'}"
    )
    assert missing.returncode != 0 and "authors_artefacts" in missing.stdout + missing.stderr


@pytest.mark.slow
def test_the_authors_table_is_recomputed_from_their_checkpoints(tmp_path):
    workdir = copy_workflow(tmp_path / "wf")
    folder = artefacts(tmp_path / "artefacts", TABLE1[:2])
    result = snakemake(
        workdir,
        "results/authors/table1.csv",
        "--cores",
        "2",
        "--config",
        "preset=tiny",
        f"authors_artefacts={folder}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    table = pd.read_csv(workdir / "results" / "authors" / "table1.csv")
    assert list(table["experiment"]) == TABLE1[:2]
    assert list(table["checkpoint_step"]) == [12, 12] and list(table["table_step"]) == [12, 12]
    assert table["logged_val_loss_at_table_step"].iloc[0] == pytest.approx(5.5)
    assert table["val_loss_at_table_step"].notna().all()
    assert table["paper_val_loss"].iloc[0] == 2.956
