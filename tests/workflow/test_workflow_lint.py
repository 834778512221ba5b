"""`snakemake --lint` finds nothing but the one lint the Snakefile explains: no rule has a conda
or container directive, by design; and `snakefmt --check` (its settings in pyproject.toml) finds
every file of the workflow formatted."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
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
    files = [
        "Snakefile",
        "workflow/Snakefile",
        *sorted(str(p.relative_to(REPO)) for p in REPO.glob("workflow/**/*.smk")),
    ]
    result = subprocess.run([snakefmt, "--check", *files], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_catalog_finds_the_workflow_where_its_standard_says(tmp_path):
    """The Snakemake workflow catalog's conventions: workflow/Snakefile (here the root Snakefile,
    included, so that both plan the same jobs) and its usage file's current keys."""
    workdir = copy_workflow(tmp_path)
    plans = [
        snakemake_in_process(workdir, "main", "--dry-run", *snakefile)
        for snakefile in ([], ["--snakefile", "workflow/Snakefile"])
    ]
    assert plans[0].returncode == plans[1].returncode == 0, plans[1].stderr
    stats = [re.search(r"Job stats:.*?total\s+\d+", p.stdout, re.S) for p in plans]
    assert stats[0] and stats[1] and stats[0].group(0) == stats[1].group(0), plans[1].stdout
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    deployment = usage["software-stack-deployment"]
    assert set(deployment) == {"conda", "apptainer", "apptainer+conda", "report"}
    assert deployment["report"] is True


def test_every_report_caption_is_found_from_its_rule_file():
    """Snakemake reads a caption relative to the file of the rule that names it: a rule file
    moved to another folder must name its captions from there."""
    rule_files = [REPO / "Snakefile", *(REPO / "workflow" / "rules").rglob("*.smk")]
    missing = [
        f"{path.relative_to(REPO)}: {caption}"
        for path in rule_files
        for caption in re.findall(r'caption="([^"]+)"', path.read_text())
        if not (path.parent / caption).is_file()
    ]
    assert not missing, missing
