"""`snakemake --lint` finds nothing but the one lint the Snakefile explains: no rule has a conda
or container directive, by design; and `snakefmt --check` (its settings in pyproject.toml) finds
every file of the workflow formatted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO, copy_workflow, snakemake_in_process

EXPLAINED = "Specify a conda environment or container for each rule."


def test_the_workflow_lints_clean_but_for_the_explained_lint(tmp_path):
    result = snakemake_in_process(copy_workflow(tmp_path), "--lint")
    out = result.stdout + result.stderr
    rules = re.findall(r"^Lints for rule (\S+)", out, re.M)
    titles = re.findall(r"^    \* (.*?):?$", out, re.M)
    assert rules, out  # the workflow was parsed and its rules linted
    assert "Lints for snakefile" not in out, out
    assert set(titles) == {EXPLAINED} and len(titles) == len(rules), out
    assert EXPLAINED.rstrip(".") in (REPO / "Snakefile").read_text()


def test_the_workflow_is_formatted_as_snakefmt_formats_it():
    snakefmt = Path(sys.executable).with_name("snakefmt")
    if not snakefmt.exists():  # a GPU node's environment; the test extra installs it
        pytest.skip("snakefmt is not installed (pip install -e '.[test]')")
    files = ["Snakefile", *sorted(str(p.relative_to(REPO)) for p in REPO.glob("workflow/**/*.smk"))]
    result = subprocess.run([snakefmt, "--check", *files], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout
