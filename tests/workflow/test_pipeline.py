"""End to end: the real DAG (Snakemake + `repro` + papermill) on the tiny preset, in a scratch
copy of the workflow, at two seeds. Checks Table 1 (seed 0) and Table 1 over seeds against the
runs' metrics, the figures, the executed notebooks (the claims over seeds), and that asking again
neither reruns nor retrains anything."""

import json

import pandas as pd
import pytest
from hang_guard import Hung
from PIL import Image
from workflow_helpers import REPO, SetUpFailure, copy_workflow, failure, shared, snakemake

from repro.analysis.results import table1_experiments
from repro.config import load_experiments, load_preset

# Not on a GPU node: a run of the GPU tests (`pytest -m gpu`) still collects this module.
nbformat = pytest.importorskip("nbformat")

pytestmark = pytest.mark.slow
# The workflow's test configuration (.test/config/config.yaml: tiny preset, two seeds), as the
# Snakemake workflow catalog's test runs it.
CONFIG = ("--configfile", ".test/config/config.yaml")
EQUAL_RATE = "baseline-wd3.125e-2-lr3e-3"  # report.equal_rate: the linear query at 3e-3


@pytest.fixture(scope="module")
def workflow_run(tmp_path_factory):
    """The workflow built once for the module's tests, or why it failed or stalled."""
    workdir = copy_workflow(tmp_path_factory.mktemp("e2e"))
    try:
        result = snakemake(workdir, "all", "--cores", "2", *CONFIG)
    except Hung as hung:
        return SetUpFailure(str(hung))
    return workdir if result.returncode == 0 else SetUpFailure(failure(result))


@pytest.fixture
def built(workflow_run):
    return shared(workflow_run)


def test_table1_matches_the_runs(built):
    preset = load_preset("tiny", REPO / "config")
    experiments = load_experiments(REPO / "config" / "experiments.yaml")
    table = pd.read_csv(built / "results" / "table1.csv")
    rows = [e.name for e in table1_experiments(preset, experiments)]
    assert list(table["experiment"]) == rows
    assert rows == [e.name for e in experiments.group("table1")] + [EQUAL_RATE]
    assert set(table["preset"]) == {"tiny"} and set(table["step"]) == {preset.report.table_step}
    assert set(table["status"]) == {"completed"}

    def val_loss(name, seed_dir="."):
        metrics = pd.read_csv(built / "results/runs/tiny" / seed_dir / name / "metrics.csv")
        return metrics.set_index("step").at[preset.report.table_step, "eval_val_loss"]

    base = val_loss("baseline")
    for row in table.itertuples():
        run = json.loads((built / "results/runs/tiny" / row.experiment / "run.json").read_text())
        # the tables' numbers have 9 significant digits (repro.files.CSV_FLOAT_FORMAT)
        assert row.val_loss == pytest.approx(val_loss(row.experiment), rel=1e-8)
        assert row.rel_improvement == pytest.approx((base - row.val_loss) / base, abs=1e-8)
        assert row.non_embedding_params == run["params"]["non_embedding_params"]
        paper = experiments[row.experiment].paper
        assert row.paper_val_loss == paper.val_loss if paper else pd.isna(row.paper_val_loss)
        assert row.lr_max == pytest.approx(experiments[row.experiment].optimizer.lr_max, rel=1e-8)

    # over seeds 0 and 1: means, and the improvement paired seed by seed
    seeds = pd.read_csv(built / "results" / "table1_seeds.csv").set_index("experiment")
    assert list(seeds.index) == list(table["experiment"]) and set(seeds["n_seeds"]) == {2}
    bases = [base, val_loss("baseline", "seed1")]
    for name, row in seeds.iterrows():
        losses = [val_loss(name), val_loss(name, "seed1")]
        assert row.val_loss_mean == pytest.approx(sum(losses) / 2, rel=1e-8)
        gains = [(b - v) / b for b, v in zip(bases, losses)]
        assert row.rel_improvement_mean == pytest.approx(sum(gains) / 2, abs=1e-8)
        assert row.val_loss_ci_low < row.val_loss_mean < row.val_loss_ci_high


def test_figures_are_images(built):
    for name in ("figure1", "figure2"):
        with Image.open(built / "results" / "figures" / f"{name}.png") as image:
            image.verify()
            assert image.size[0] > 500
        assert (built / "results" / "figures" / f"{name}.pdf").read_bytes().startswith(b"%PDF")


def test_notebooks_ran_without_error(built):
    for name in ("table1", "figure1", "figure2", "explore", "table1_seeds"):
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
    claims = nbformat.read(built / "results/notebooks/table1.ipynb", as_version=4).cells[-1]
    assert "at every evaluation" in str(claims.outputs) and "2 seeds" in str(claims.outputs)


def test_runs_are_kept_and_not_retrained(built):
    run = built / "results" / "runs" / "tiny" / "baseline"
    assert (run / "live" / "ckpt.pt").exists()
    again = snakemake(built, "all", "--cores", "2", *CONFIG)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # Losing the declared outputs does not retrain: `repro train` finds its finished run in live/.
    checkpoint_mtime = (run / "live" / "ckpt.pt").stat().st_mtime_ns
    (run / "metrics.csv").unlink()
    redo = snakemake(built, "results/runs/tiny/baseline/metrics.csv", "--cores", "1", *CONFIG)
    assert redo.returncode == 0, failure(redo)
    assert (run / "live" / "ckpt.pt").stat().st_mtime_ns == checkpoint_mtime
    assert (run / "metrics.csv").read_text() == (run / "live" / "metrics.csv").read_text()


def test_report_holds_table1_figures_and_the_claims(built):
    result = snakemake(built, "--report", "results/report.html", *CONFIG)
    assert result.returncode == 0, failure(result)
    report = (built / "results" / "report.html").read_text()
    for caption in (
        "Table 1 at preset <strong>tiny",
        "The claims check at preset <strong>tiny",
        "Figure 1 at preset <strong>tiny",
        "Figure 2 at preset <strong>tiny",
    ):
        assert caption in report
    claims = pd.read_csv(built / "results" / "claims.csv")
    assert claims["caveat"].str.contains("cannot test the paper").all()
    # the tables and figures are on the report's page (its description, a JSON string in the
    # single HTML file), not only CSV download links
    page, _ = json.JSONDecoder().raw_decode(report.split("workflow_desc = ", 1)[1])
    for name in ("Table 1", "Claims", "Table 1 over seeds", "Figure 1", "Figure 2"):
        assert f">{name}</h" in page
    for row in pd.read_csv(built / "results" / "table1.csv").itertuples():
        assert f"<td>{row.experiment}</td>" in page and f"{row.rel_improvement:.2%}" in page
    assert "<td>beats baseline at every evaluation</td>" in page
    assert page.count('<img src="data:image/png;base64,') == 2
    assert page.index("Table 1 at preset <strong>tiny") < page.index("<td>baseline</td>")


def test_downstream_compares_the_table1_runs(built, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    items = [
        {"query": f"{i} plus one is", "choices": [f" {i + 1}", " blue"], "label": 0}
        for i in range(5)
    ]
    (tasks / "items.json").write_text("\n".join(json.dumps(item) for item in items))
    (tasks / "count.yaml").write_text(
        "task: repro_count\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    validation: {tasks / 'items.json'}\noutput_type: multiple_choice\n"
        "validation_split: validation\ndoc_to_text: '{{query}}'\ndoc_to_target: '{{label}}'\n"
        "doc_to_choice: '{{choices}}'\nmetric_list:\n  - metric: acc\n"
    )
    config = (*CONFIG, "--config", "downstream_tasks=[repro_count]")
    config += (f"downstream_include_path={tasks}",)
    result = snakemake(built, "results/downstream.csv", "--cores", "2", *config)
    assert result.returncode == 0, failure(result)
    table = pd.read_csv(built / "results" / "downstream.csv")
    experiments = load_experiments(REPO / "config" / "experiments.yaml")
    assert list(table["experiment"]) == [e.name for e in experiments.group("table1")]
    assert set(table["n_items"]) == {5} and (table["diff_ci_low"] <= table["diff_ci_high"]).all()


def test_figure2_table_lists_only_the_sweep(built):
    notebook = nbformat.read(built / "results/notebooks/figure2.ipynb", as_version=4)
    table = notebook.cells[-1].outputs[0]["data"]["text/plain"]
    assert "resgelu-lr3e-3" in table and "mlp4.75-scaled" not in table  # a Table 1 run only
