"""Commands that do not train start without the libraries they do not need: torch (seconds to
import), TensorBoard, pandas, rfc3987_syntax (a grammar built as it is imported, which jsonschema
imports for a format check the package's schemas do not use). benchmarks/bench_cli_start.py
measures the start; here, what a process has imported once the command is done (a process of its
own, as a user starts it)."""

import os
import subprocess
import sys

from conftest import REPO, train_args
from workflow_helpers import copy_workflow

HEAVY = ("torch", "tensorboard", "pandas", "rfc3987_syntax")


def imported_after(code: str, cwd=REPO) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running `code` (SystemExit caught:
    a command that fails or prints its help exits)."""
    script = (
        f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    env = os.environ | {"PYTHONPATH": str(REPO / "src")}
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=cwd, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[-1].split()


def test_the_workflows_dry_run_imports_neither_torch_nor_tensorboard(tmp_path):
    # pandas is Snakemake's own (its SLURM plugin imports it). The Snakefile's config check,
    # snakemake.utils.validate, would import jsonschema with rfc3987_syntax: the Snakefile imports
    # jsonschema without it first.
    work = copy_workflow(tmp_path / "work")
    argv = ["snakemake", "-n", "main", "--cores", "1", "--config", "preset=tiny"]
    code = f"sys.argv = {argv!r}; import runpy; runpy.run_module('snakemake', run_name='__main__')"
    assert set(imported_after(code, cwd=work)) <= {"pandas"}


def test_describe_without_a_group_lists_the_groups_without_importing_torch():
    code = "from repro.cli.assembly import main; main(['describe', '--preset', 'paper'])"
    assert imported_after(code) == []


def test_train_refuses_a_configuration_before_importing_torch(tmp_path):
    """A misspelt experiment is refused in a blink, not after seconds of importing torch."""
    argv = train_args(tmp_path, tmp_path, tmp_path / "run", experiment="nope")
    code = f"from repro.cli.assembly import main; main({argv!r})"
    assert imported_after(code) == []


def test_an_audit_log_that_is_refused_is_refused_before_importing_torch(tmp_path):
    log = tmp_path / "gpt3large_x.csv"
    log.write_text("not a loss log\n")
    argv = ["import-audit-log", str(log), "--out", str(tmp_path / "run")]
    assert "torch" not in imported_after(f"from repro.cli.assembly import main; main({argv!r})")


def test_the_test_suites_shared_module_imports_no_torch():
    """pytest-xdist's controller imports tests/conftest.py (and the plugins it names) before it
    starts its workers, and runs no test: without torch, the workers start seconds sooner."""
    tests = [str(REPO / "tests"), str(REPO / "tests" / "helpers")]  # pyproject's pythonpath
    code = f"sys.path[:0] = {tests!r}; import conftest, derived_runs, workflow_plans"
    assert "torch" not in imported_after(code)
