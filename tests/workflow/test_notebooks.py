"""Each notebook run by hand through papermill, as the README shows (`-p preset ...` and nothing
else), reads the runs of the preset it is given: runs_dir is derived after papermill's parameters,
not in the parameters cell, which holds literals only (every notebook in notebooks/). The
checkout's layout is copied into a scratch folder (notebooks/, config/, results/runs/<preset>/)
with fabricated runs at two presets whose losses differ, so a notebook that read the default
preset's runs would show other numbers, with exit 0."""

import ast
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO

# Not on a GPU node (no papermill there): `pytest -m gpu` still collects this module. papermill
# (with IPython and Jupyter's client: 0.4 s) where a notebook runs, not in the quick suite's
# collection of these slow tests.
nbformat = pytest.importorskip("nbformat")

pytestmark = pytest.mark.slow  # each notebook in a Jupyter kernel of its own: several processes

# The default preset's runs: the Table 1 experiments, all at loss 20 (no improvement anywhere).
SMOKE_LOSSES = {0: 30.0, 4: 25.0, 8: 22.0, 12: 20.0}


@pytest.fixture
def checkout(tmp_path, tiny_runs, monkeypatch, write_run):
    """notebooks/, config/ and results/runs/{tiny,smoke}/ as in a checkout."""
    for part in ("notebooks", "config"):
        shutil.copytree(REPO / part, tmp_path / "checkout" / part)
    runs = tmp_path / "checkout" / "results" / "runs"
    shutil.copytree(tiny_runs, runs / "tiny")
    for name in os.listdir(tiny_runs):
        write_run(runs / "smoke" / name, name, SMOKE_LOSSES, last_step=12, preset="smoke")
    # the kernel imports this checkout's library
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    return tmp_path / "checkout"


def run_notebook(checkout, name: str, **parameters) -> nbformat.NotebookNode:
    """Execute notebooks/<name>.ipynb from notebooks/ (as Jupyter would) with `parameters`."""
    papermill = pytest.importorskip("papermill")
    out = checkout / "notebooks" / f"{name}.out.ipynb"
    papermill.execute_notebook(
        str(checkout / "notebooks" / f"{name}.ipynb"),
        str(out),
        parameters={"preset": "tiny", **parameters},
        cwd=str(checkout / "notebooks"),
        progress_bar=False,
        kernel_name="python3",
        engine_name="repro",  # as the workflow runs them
    )
    return nbformat.read(out, as_version=4)


def outputs(notebook) -> str:
    """Every output of every code cell, as text."""
    return str([cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"])


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_parameters_cell_holds_literals_only(path):
    """papermill injects its parameters after the parameters cell: a value derived there from
    another (runs_dir from preset) keeps the default's, whatever `-p` gives."""
    cells = [
        c
        for c in nbformat.read(path, as_version=4).cells
        if "parameters" in c.metadata.get("tags", [])
    ]
    assert len(cells) == 1, f"{path.name}: one cell tagged parameters"
    for statement in ast.parse(cells[0].source).body:
        assert isinstance(statement, ast.Assign), ast.unparse(statement)
        try:
            ast.literal_eval(statement.value)
        except ValueError:
            pytest.fail(f"{path.name}: {ast.unparse(statement)} is derived, not a literal")


def test_table1_reads_the_preset_it_is_given(checkout):
    """By hand, into results/<preset>/: the workflow's results/table1.csv, of whichever preset
    it was built at, is left as it is."""
    (checkout / "results" / "table1.csv").write_text("experiment,preset\nbaseline,smoke\n")
    notebook = run_notebook(checkout, "table1")
    assert "baseline,smoke" in (checkout / "results" / "table1.csv").read_text()
    # printed above the claims check, which says `holds` below the paper's scale too
    assert "not evidence for or against the paper's claims" in outputs(notebook)
    table = pd.read_csv(checkout / "results" / "tiny" / "table1.csv").set_index("experiment")
    assert set(table["preset"]) == {"tiny"}
    assert table.at["baseline", "val_loss"] == 5.0  # tiny's runs, not smoke's 20
    assert table.at["resgelu-lr3e-3", "val_loss"] == pytest.approx(4.93)
    html = (checkout / "results" / "tiny" / "table1.html").read_text()
    assert "<td>resgelu-lr3e-3</td>" in html and "1.40%" in html
    claims = (checkout / "results" / "tiny" / "claims.html").read_text()
    assert "at every evaluation" in claims


def test_table1_seeds_reads_the_preset_it_is_given(checkout):
    run_notebook(checkout, "table1_seeds")
    table = pd.read_csv(checkout / "results" / "tiny" / "table1_seeds.csv").set_index("experiment")
    assert table.at["baseline", "val_loss_mean"] == 5.0
    assert "<td" in (checkout / "results" / "tiny" / "table1_seeds.html").read_text()


def test_figure1_reads_the_preset_it_is_given(checkout):
    notebook = run_notebook(checkout, "figure1")
    assert "1.40%" in outputs(notebook)  # resgelu-lr3e-3 at step 12: 0.07 / 5 (smoke's: 0.00%)
    assert (checkout / "results" / "tiny" / "figures" / "figure1.png").stat().st_size > 10_000


def test_figure1_takes_the_audits_logs_imported_at_its_preset(checkout, tmp_path):
    from audit_helpers import curve, write_log

    from repro.cli.assembly import main

    log = write_log(tmp_path / "gpt3large_resgelu_s0p5_seed43.csv", curve(12, interval=4, end=4.9))
    out = checkout / "results" / "audit" / "logs" / "tiny" / log.stem
    stated = '{"query_mode": "residual_gelu", "peak_lr": 3e-3}'
    command = ["import-audit-log", str(log), "--preset", "tiny", "--stated", stated]
    assert main([*command, "--out", str(out)]) == 0
    png = checkout / "results" / "tiny" / "figures" / "figure1.png"
    run_notebook(checkout, "figure1")
    without = png.read_bytes()
    run_notebook(checkout, "figure1", audit_logs_dir="../results/audit/logs/tiny")
    assert png.read_bytes() != without  # the log drawn beside resgelu-lr3e-3


def test_figure2_reads_the_preset_it_is_given(checkout):
    notebook = run_notebook(checkout, "figure2")
    listed = notebook.cells[-1].outputs[0]["data"]["text/plain"]
    assert "4.93" in listed and "20.0" not in listed
    assert (checkout / "results" / "tiny" / "figures" / "figure2.png").exists()


def test_explore_overlays_any_list_of_runs(checkout, tmp_path, write_run):
    elsewhere = write_run(
        tmp_path / "theirs" / "baseline", "baseline", {0: 11.0, 12: 7.5}, last_step=12
    )
    notebook = run_notebook(
        checkout, "explore", runs=["baseline", "resgelu-lr3e-3", str(elsewhere)]
    )
    shown = outputs(notebook)
    assert "4.93" in shown and "7.5" in shown and "20.0" not in shown
    # it ends in a table of what each run recorded, one column per run, not a dump of records
    last = notebook.cells[-1].outputs[0]["data"]
    assert "RunRecord" not in shown and "<table" in last["text/html"]
    preset_row = last["text/html"].split("<th>preset</th>", 1)[1].split("</tr>", 1)[0]
    assert preset_row.split() == ["<td>tiny</td>"] * 3
    assert f"<th>{elsewhere}</th>" in last["text/html"]
    figure = [
        o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    assert len(figure) == 1


def test_a_notebook_run_logs_no_warning_and_no_error(checkout, capfd):
    run_notebook(checkout, "figure2")
    logged = capfd.readouterr().err
    assert "WARNING" not in logged and "ERROR" not in logged, logged


def test_a_kernel_is_interrupted_in_a_cell_not_on_its_way_out(monkeypatch):
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from repro.analysis.notebook_engine import KernelManager

    sent = []

    async def interrupt(manager):
        sent.append(manager.shutting_down)

    monkeypatch.setattr(AsyncKernelManager, "_async_interrupt_kernel", interrupt)
    manager = KernelManager(kernel_name="python3")
    assert manager.transport == "ipc"
    asyncio.run(manager._async_interrupt_kernel())  # a cell that timed out: interrupted
    manager.shutting_down = True
    asyncio.run(manager._async_interrupt_kernel())  # after the last cell: not
    assert sent == [False]


def test_kernels_started_at_once_never_share_their_sockets(tmp_path, monkeypatch):
    """The workflow runs notebooks in parallel, each kernel in notebooks/: two kernels' IPC
    sockets lie in folders of their own, never beside a prefix both share (where the first free
    number is the same for both, and each reads the other's messages: "Invalid Signature")."""
    import asyncio

    from repro.analysis.notebook_engine import KernelManager

    monkeypatch.chdir(tmp_path)
    first, second = (KernelManager(kernel_name="python3") for _ in range(2))
    assert Path(first.ip).parent != Path(second.ip).parent
    assert tmp_path not in (Path(first.ip).parent, Path(second.ip).parent)
    asyncio.run(first._async_cleanup_resources())  # a kernel shut down leaves no folder
    assert not Path(first.ip).parent.exists() and Path(second.ip).parent.exists()
    asyncio.run(second._async_cleanup_resources())
