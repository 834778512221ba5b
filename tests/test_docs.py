"""The README and docs/ hold no placeholder, name no repository path that does not exist, and no
file of the project speaks of the tickets or sessions it came from."""

import re
import subprocess

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
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
LINK = re.compile(r"\]\(([^)\s]+)\)")
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
    text = page.read_text()
    named = {m.group(1).rstrip(".") for m in REPO_PATH.finditer(text)}
    # A path git ignores is one the package makes (a wheelhouse, a cache): named, never committed.
    missing = sorted(p for p in named if not (REPO / p).exists() and not git_ignores(p))
    for target in LINK.findall(text):
        if not re.match(r"[a-z]+:|#", target):
            path = target.split("#")[0]
            if not (page.parent / path).exists():
                missing.append(target)
    assert not missing, f"{page} names paths that do not exist: {missing}"


def test_the_path_check_catches_a_missing_path(tmp_path):
    named = [
        m.group(1) for m in REPO_PATH.finditer("see `workflow/rules/x.smk` and src/repro/a.py")
    ]
    assert named == ["workflow/rules/x.smk", "src/repro/a.py"]
    assert PLACEHOLDER.search(prose("in about\nSMOKETIME on 2 cores")) is not None


def git_ignores(path: str) -> bool:
    return subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", path]).returncode == 0


def project_files():
    """The files of the project (tracked by git, not generated ones such as *.egg-info)."""
    tops = ["src", "docs", "benchmarks", "workflow", "config", "profiles"]
    tops += ["README.md", "Snakefile", "environment.yml"]
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", *tops], capture_output=True, text=True, check=True
    )
    return [REPO / line for line in listed.stdout.splitlines()]


def test_no_words_private_to_their_authors():
    found = [
        f"{path.relative_to(REPO)}: {m.group(0)}"
        for path in project_files()
        if path.suffix not in {".pyc", ".png", ".pdf"}
        for m in PRIVATE.finditer(path.read_text(errors="replace"))
    ]
    assert not found, found


def test_counts_the_docs_give_are_the_configuration_s():
    from repro.config import load_experiments, load_run

    sweep = len(load_experiments().group("figure2"))
    assert f"adds Figure 2's sweep: {sweep} runs)" in (REPO / "docs" / "scale.md").read_text()
    untied = load_run("paper", "untied-baseline").train.max_step
    tuning = " ".join((REPO / "docs" / "tuning.md").read_text().split())
    assert f"run {untied + 1:,} steps" in tuning
    assert f"max_step is {untied:,} at `paper` ({untied + 1:,} steps" in tuning


def test_git_ignores_the_folders_the_docs_export_to():
    commands = " ".join(page.read_text() for page in PAGES)
    outs = re.findall(r"repro export \S+ --out (\S+)", commands)
    assert outs
    for out in outs:
        ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"{out}/README.md"])
        assert ignored.returncode == 0, f"{out}: an export the docs make would show in git status"
