"""The README and docs/ are reference, not record: the README short, with the commands a user runs
first at its top; docs/testing.md and docs/performance.md within their sizes; no page names a
commit of this repository (versions are named by tag), states a date or a load average. What a
machine measured lives in benchmarks/results/, with its date, machine, command and load."""

import re
import subprocess

import pytest
from conftest import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]
LIMITS = {"docs/testing.md": 100, "docs/performance.md": 250}

# A commit as a page would name it: 7 to 40 hex digits, at least one a letter (a plain number is a
# count or a size, however long).
HEX = re.compile(r"(?<![\w./-])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
LOAD = re.compile(r"\bload(?: averages?)?\s+(?:of |at |about |around |under |was |is )?~?\d", re.I)
# Dates that are facts of the paper, not of a measurement: its arXiv versions.
PAPER_VERSIONS = {"2026-04-24", "2026-05-26"}


def rel(page) -> str:
    return str(page.relative_to(REPO))


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The numbered lines outside fenced blocks (a block is a command or what a program prints)."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def test_the_readme_is_short_and_starts_with_the_commands():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 120, len(lines)
    assert len(text.split()) <= 1200, len(text.split())
    first = "\n".join(lines[:40])
    for command in (
        "python3 -m venv .venv",  # set up
        "python -m pip install",
        "ruff check && ruff format --check && python -m pytest",  # test
        "python -m pytest -m slow",
        "snakemake --cores 1 results/table1.csv",  # run
        "snakemake --cores 2 main",
    ):
        assert command in first, command


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_the_long_pages_keep_their_size(name):
    lines = (REPO / name).read_text().splitlines()
    assert len(lines) <= LIMITS[name], f"{name}: {len(lines)} lines"


def commits_of_this_repository(names: set[str]) -> set[str]:
    """Those of `names` that git resolves to a commit of this repository."""
    if not names:
        return set()
    asked = sorted(names)
    answer = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "--batch-check=%(objecttype)"],
        input="".join(f"{name}^{{commit}}\n" for name in asked),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return {name for name, kind in zip(asked, answer) if kind == "commit"}


def test_no_page_names_a_commit_of_this_repository():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    named = {(rel(p), m.group(0)) for p in PAGES for m in HEX.finditer(p.read_text())}
    ours = commits_of_this_repository({name for _, name in named})
    found = sorted(f"{page}: {name}" for page, name in named if name in ours)
    assert not found, f"name a version by its tag, not a commit: {found}"


def test_the_commit_check_tells_this_repository_from_others():
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    text = f"as of {head}, beside the authors' 2a9a9586, size 1234567, sha256 of `x`"
    names = {m.group(0) for m in HEX.finditer(text)}
    assert names == {head, "2a9a9586"}
    assert commits_of_this_repository(names) == {head}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_page_states_a_date_or_a_load(page):
    found = [
        f"{rel(page)}:{number}: {match.group(0)}"
        for number, line in prose_lines(page.read_text())
        for pattern in (DATE, LOAD)
        for match in pattern.finditer(line)
        if match.group(0) not in PAPER_VERSIONS
    ]
    assert not found, f"a measured figure goes to benchmarks/results/: {found}"


def test_the_date_and_load_check_catches_them():
    said = (
        "took 3510 s at load 10 to 22 on 2026-11-27 (load average 7.4); the load (1-minute average)"
    )
    assert [m.group(0) for m in DATE.finditer(said)] == ["2026-11-27"]
    assert [m.group(0) for m in LOAD.finditer(said)] == ["load 1", "load average 7"]


def test_each_results_page_heads_its_figures_with_date_machine_command_and_load():
    pages = sorted((REPO / "benchmarks" / "results").glob("*.md"))
    assert pages
    for page in pages:
        if page.name.startswith("gpu-"):  # benchmarks/gpu/summary.py's, tested with it
            continue
        sections = re.split(r"(?m)^## ", page.read_text())[1:]
        assert sections, page.name
        for section in sections:
            for field in ("- date:", "- machine:", "- command:", "- load"):
                assert field in section, f"{page.name}: {section.splitlines()[0]} lacks {field}"
