"""`snakemake main`, the paper's evidence, runs on the core alone: parsing the workflow imports no
module of the annex, every command its jobs run is a core command, and every notebook they execute
imports (through everything it imports) no module of the annex."""

import re
import subprocess
import sys

from conftest import REPO
from import_graph import LIBRARY, notebook_imports
from workflow_helpers import copy_workflow

from repro.cli.assembly import CORE_COMMANDS

PARSE = (  # snakemake's command line, then the annex's modules it imported
    "import atexit, sys\n"
    "atexit.register(lambda: print('ANNEX', sorted(m for m in sys.modules "
    "if m.startswith('repro.annex')), file=sys.stderr))\n"
    "from snakemake.cli import main\nmain(sys.argv[1:])\n"
)


def test_snakemake_main_runs_on_the_core_alone(tmp_path):
    workdir = copy_workflow(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", PARSE, "-n", "-p", "--cores", "1", "main"],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": f"{sys.prefix}/bin:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ANNEX []" in done.stderr, done.stderr[-2000:]
    commands = set(re.findall(r"^Shell command: (?:exec )?repro (\S+)", done.stdout, re.M))
    assert commands and commands <= set(CORE_COMMANDS), commands
    notebooks = set(re.findall(r"papermill .*?(notebooks/\w+\.ipynb)", done.stdout))
    assert "notebooks/table1.ipynb" in notebooks and "notebooks/figure1.ipynb" in notebooks
    for notebook in sorted(notebooks):
        annex = sorted(
            str(p.relative_to(LIBRARY))
            for p in notebook_imports(REPO / notebook)
            if p.is_relative_to(LIBRARY / "annex")
        )
        assert not annex, f"{notebook} imports {annex}"


def test_the_check_sees_a_notebook_that_reaches_the_annex_through_the_core(tmp_path):
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(
        '{"cells": [{"cell_type": "code", "source": ["from repro.annex.claims import joint"]}]}'
    )
    assert LIBRARY / "annex" / "claims" / "groups.py" in notebook_imports(notebook)
