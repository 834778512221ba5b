"""Every module of the package imports alone, in a fresh interpreter: what a user's script, a
papermill entry point or a worker process imports first must not depend on what some other import
happened to load before it (a circular import hides that way)."""

import subprocess
import sys
from pathlib import Path

import pytest

import repro

PACKAGE = Path(repro.__file__).parent


def modules() -> list[str]:
    """The package's modules by dotted name, but __main__ (which runs the command line)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] != "__main__":
            names.append(".".join(parts))
    return names


def test_the_modules_are_found():
    found = modules()
    assert {"repro", "repro.analysis.notebook_engine", "repro.training.loop"} <= set(found)
    assert "repro.__main__" not in found


# A fresh interpreter each (most import torch, a second or so each): the slow suite.
@pytest.mark.slow
@pytest.mark.parametrize("module", modules())
def test_a_module_imports_alone(module):
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_the_notebook_kernel_imports_alone():
    """The papermill engine's module, imported by name before papermill, as a user's script or a
    test does: papermill loads its engines' entry points as it is imported, this one among them."""
    code = (
        "from repro.analysis.notebook_engine import KernelManager, Engine\n"
        "from papermill.engines import papermill_engines\n"
        "assert papermill_engines.get_engine('repro') is Engine\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
