"""The README and docs/ hold no placeholder; no page, module, test, notebook or rule names a
repository path or a module of the package that does not exist; no file of the project speaks of
the tickets or sessions it came from, and only repro.rundir.history speaks of the package's past."""

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# Stand-ins left for a figure or a text to come: TODO marks, or an ALL-CAPS word ending in what
# it stands for (SMOKETIME, NUMRUNS...). Code (fenced or `inline`) is not prose and is skipped.
PLACEHOLDER = re.compile(
    r"\b(TODO|TBD|FIXME|XXX+|PLACEHOLDER"
    r"|[A-Z]{2,}(TIME|SIZE|COUNT|NUMBER|VALUE|DATE|HOURS|FIGURE|RESULT|RUNS|COST|SPEED|LOSS))\b"
)
# A path inside the repository, as the pages write it (relative to the repository root).
# results/ and data/ are generated, so they are not checked.
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:src/repro|workflow|benchmarks|config|notebooks|tests|docs|profiles)"
    r"/[\w./-]*[\w/])"
)
# Words that only make sense to whoever wrote them.
PRIVATE = re.compile(
    r"\bissues?[- #]?\d+|\bthis session\b|\bsessions so far\b|\bthe (?:GPU )?review\b"
    r"|\bticket\b|\bwhoever measures\b",
    re.I,
)


def prose(text: str) -> str:
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_placeholder(page):
    found = [m.group(0) for m in PLACEHOLDER.finditer(prose(page.read_text()))]
    assert not found, f"{page}: {found}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_named_exists(page):
    # (and its links, as every markdown file's: tests/docs/test_links.py)
    text = page.read_text()
    named = {m.group(1).rstrip(".") for m in REPO_PATH.finditer(text)}
    # A path git ignores is one the package makes (a wheelhouse, a cache): named, never committed.
    missing = sorted(p for p in named if not (REPO / p).exists() and not git_ignores(p))
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_path_check_catches_a_missing_path(tmp_path):
    paths = ["{}/rules/x.smk".format("workflow"), "{}/repro/a.py".format("src")]
    missing = f"see `{paths[0]}` and {paths[1]}, or {'repro'}.nah"
    assert [m.group(1) for m in REPO_PATH.finditer(missing)] == paths
    assert [m.group(0) for m in MODULE.finditer(missing)] == ["repro" + ".nah"]
    assert not module_exists("repro" + ".nah") and module_exists("repro.rundir.RunRecord")
    assert PLACEHOLDER.search(prose("in about\nSMOKETIME on 2 cores")) is not None


def git_ignores(path: str) -> bool:
    return subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", path]).returncode == 0


PROJECT = ("src", "docs", "benchmarks", "workflow", "config", "profiles", "tests", "notebooks")
PROJECT += ("README.md", "Snakefile", "environment.yml", ".ci")


def project_files(*tops: str):
    """The text files of the project under `tops` (tracked by git, not generated ones such as
    *.egg-info, nor the fixtures: run directories as older code wrote them, nor a GPU window's raw
    files in benchmarks/results/<folder>/: what that commit's code printed, kept as it came)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", *(tops or PROJECT)],
        capture_output=True,
        text=True,
        check=True,
    )
    paths = [REPO / line for line in listed.stdout.splitlines()]
    binary = {".pyc", ".png", ".pdf", ".pt", ".bin", ".npy", ".parquet"}
    raw = REPO / "benchmarks" / "results"
    return [
        p
        for p in paths
        if p.suffix not in binary and "fixtures" not in p.parts and p.parent.parent != raw
    ]


def test_no_words_private_to_their_authors():
    found = [
        f"{path.relative_to(REPO)}: {m.group(0)}"
        for path in project_files()
        for m in PRIVATE.finditer(path.read_text(errors="replace"))
    ]
    assert not found, found


# A dotted name of the package in a comment, docstring or page: repro.rundir, repro.model.GPT.
MODULE = re.compile(r"(?<![\w./-])repro(?:\.[A-Za-z_]\w*)+")


def module_exists(dotted: str) -> bool:
    """Whether a dotted name is a module of the package, or a name that one of its modules
    holds (repro.rundir.RunRecord)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = REPO / "src" / Path(*parts[:n])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.exists():
            rest = parts[n:]
            return (
                not rest
                or rest[0].startswith("__")
                or re.search(rf"\b{rest[0]}\b", module.read_text()) is not None
            )
    return False


def test_every_path_and_module_named_in_the_code_exists():
    """Modules, tests, notebooks and rules name files and modules as the pages do: each exists."""
    found = []
    for path in project_files(*PROJECT[:-3], "Snakefile", ".ci"):
        text = path.read_text(errors="replace")
        named = {m.group(1).rstrip(".") for m in REPO_PATH.finditer(text)}
        found += [
            f"{path.relative_to(REPO)}: {p}"
            for p in sorted(named)
            if not (REPO / p).exists() and not git_ignores(p)
        ]
        modules = {m.group(0).rstrip(".") for m in MODULE.finditer(text)}
        found += [f"{path.relative_to(REPO)}: {m}" for m in sorted(modules) if not module_exists(m)]
    assert not found, found


# The package speaks of what it is: the past of the code is git's, and the layouts of older run
# directories are repro.rundir.history's alone.
HISTORY_MODULE = Path("src/repro/rundir/history.py")
HISTORY = re.compile(
    r"\bused to\b|\bpreviously\b|\b(?:earlier|older) versions?\b|\bcommit [0-9a-f]{7,40}\b"
    r"|\b(?:has|have) always\b|\bwas changed\b|\bformerly\b",
    re.I,
)


def test_only_the_compatibility_module_speaks_of_the_past():
    found = [
        f"{path.relative_to(REPO)}: {m.group(0)}"
        for path in project_files("src", "workflow")
        if path.relative_to(REPO) != HISTORY_MODULE
        for m in HISTORY.finditer(path.read_text(errors="replace"))
    ]
    assert not found, found
    assert HISTORY.search("the layout the package used to write") is not None


def test_counts_the_docs_give_are_the_configuration_s():
    from repro.config import load_experiments, load_run

    sweep = len(load_experiments().group("figure2"))
    assert f"adds Figure 2's sweep: {sweep} runs)" in (REPO / "docs" / "scale.md").read_text()
    untied = load_run("paper", "untied-baseline").train.max_step
    tuning = " ".join((REPO / "docs" / "annex" / "tuning.md").read_text().split())
    assert f"run {untied + 1:,} steps" in tuning
    assert f"max_step is {untied:,} at `paper` ({untied + 1:,} steps" in tuning


def test_git_ignores_the_folders_the_docs_export_to():
    commands = " ".join(page.read_text() for page in PAGES)
    outs = re.findall(r"repro export \S+ --out (\S+)", commands)
    assert outs
    for out in outs:
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"{out}/README.md"])
        assert ignored.returncode == 0, f"{out}: an export the docs make would show in git status"


# A path the workflow writes under results/: a rule's output or log, as its rule files spell it.
WORKFLOW_RESULT = re.compile(r"\"results/([\w.]+)(/)?[^\"\s:]*\"")


def test_results_readme_lists_every_file_and_folder_the_workflow_writes():
    rules = [REPO / "Snakefile", *(REPO / "workflow" / "rules").rglob("*.smk")]
    written = {
        name + (slash or "")
        for path in rules
        for name, slash in WORKFLOW_RESULT.findall(path.read_text())
    }
    assert {"table1.csv", "evidence.csv", "runs/", "notebooks/"} <= written
    table = (REPO / "results" / "README.md").read_text().split("|---|", 1)[1]
    listed = set(re.findall(r"^\| (.*?) \|", table, re.M))
    paths = " ".join(listed)
    missing = {w for w in written if not re.search(rf"`{re.escape(w)}", paths)}
    assert not missing, f"results/README.md lists no {sorted(missing)}"


@pytest.mark.parametrize("page", ["docs/runs.md", "docs/report.md", "results/README.md"])
def test_the_notebook_lists_name_every_notebook(page):
    notebooks = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
    text = (REPO / page).read_text()
    lists = re.findall(r"notebooks/\{([\w,]+)\}\.ipynb", text)
    assert lists and all(set(listed.split(",")) == notebooks for listed in lists), page
