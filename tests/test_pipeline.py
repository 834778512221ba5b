"""End to end: the real DAG (Snakemake + `repro` + papermill) on the tiny preset, in a scratch
copy of the workflow. Checks Table 1 against the runs' metrics, the figures, the executed
notebooks, and that asking again neither reruns nor retrains anything."""

import json

import nbformat
import pandas as pd
import pytest
from PIL import Image
from workflow_helpers import REPO, copy_workflow, snakemake

from repro.config import load_experiments, load_preset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("e2e"))
    result = snakemake(workdir, "all", "--cores", "2", "--config", "preset=tiny")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return workdir


def test_table1_matches_the_runs(built):
    preset = load_preset("tiny", REPO / "config")
    experiments = load_experiments(REPO / "config" / "experiments.yaml")
    table = pd.read_csv(built / "results" / "table1.csv")
    assert list(table["experiment"]) == [e.name for e in experiments.group("table1")]
    assert set(table["preset"]) == {"tiny"} and set(table["step"]) == {preset.report.table_step}
    assert set(table["status"]) == {"completed"}

    def val_loss(name):
        metrics = pd.read_csv(built / "results" / "runs" / "tiny" / name / "metrics.csv")
        return metrics.set_index("step").at[preset.report.table_step, "eval_val_loss"]

    base = val_loss("baseline")
    for row in table.itertuples():
        run = json.loads((built / "results/runs/tiny" / row.experiment / "run.json").read_text())
        assert row.val_loss == pytest.approx(val_loss(row.experiment), rel=1e-12)
        assert row.rel_improvement == pytest.approx((base - row.val_loss) / base, rel=1e-9)
        assert row.non_embedding_params == run["params"]["non_embedding_params"]
        assert row.paper_val_loss == experiments[row.experiment].paper_val_loss
        assert row.lr_max == experiments[row.experiment].optimizer.lr_max


def test_figures_are_images(built):
    for name in ("figure1", "figure2"):
        with Image.open(built / "results" / "figures" / f"{name}.png") as image:
            image.verify()
            assert image.size[0] > 500
        assert (built / "results" / "figures" / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def test_notebooks_ran_without_error(built):
    for name in ("table1", "figure1", "figure2", "explore"):
        notebook = nbformat.read(built / "results" / "notebooks" / f"{name}.ipynb", as_version=4)
        errors = [
            o
            for cell in notebook.cells
            if cell.cell_type == "code"
            for o in cell.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        assert not errors, f"{name}: {errors}"
        injected = [
            c for c in notebook.cells if "injected-parameters" in c.metadata.get("tags", [])
        ]
        assert injected and 'preset = "tiny"' in injected[0].source


def test_runs_are_kept_and_not_retrained(built):
    run = built / "results" / "runs" / "tiny" / "baseline"
    assert (run / "live" / "ckpt.pt").exists()
    again = snakemake(built, "all", "--cores", "2", "--config", "preset=tiny")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # Losing the declared outputs does not retrain: `repro train` finds its finished run in live/.
    checkpoint_mtime = (run / "live" / "ckpt.pt").stat().st_mtime_ns
    (run / "metrics.csv").unlink()
    redo = snakemake(
        built, "results/runs/tiny/baseline/metrics.csv", "--cores", "1", "--config", "preset=tiny"
    )
    assert redo.returncode == 0, redo.stderr[-3000:]
    assert (run / "live" / "ckpt.pt").stat().st_mtime_ns == checkpoint_mtime
    assert (run / "metrics.csv").read_text() == (run / "live" / "metrics.csv").read_text()
