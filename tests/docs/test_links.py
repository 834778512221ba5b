"""Every relative link of every markdown file git tracks leads to a file or folder of the
checkout: the README, docs/, config/, results/ and benchmarks/results/ alike. A link's `#anchor`
is optional and not checked; addresses (`https:`, `mailto:`) and links inside code are not
links to check."""

import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

# An inline link or image, `[text](target)` or `[text](<target> "title")`, and a reference
# definition, `[name]: target`.
INLINE = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a scheme: https:, mailto:


def tracked_markdown() -> list[Path]:
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "*.md"], capture_output=True, text=True, check=True
    )
    return [REPO / line for line in listed.stdout.splitlines()]


def relative_links(text: str) -> list[str]:
    """The relative targets a page links to, outside fenced blocks and `inline code`."""
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"(?ms)^ *```.*?^ *```", "", text))
    targets = INLINE.findall(prose) + REFERENCE.findall(prose)
    return [t for t in targets if not ADDRESS.match(t) and not t.startswith("#")]


def broken_links(page: Path) -> list[str]:
    return [
        target
        for target in relative_links(page.read_text())
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]


def test_git_tracks_the_pages():
    pages = {str(p.relative_to(REPO)) for p in tracked_markdown()}
    assert {"README.md", "results/README.md", "docs/testing.md", "CHANGELOG.md"} <= pages


@pytest.mark.parametrize("page", tracked_markdown(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(REPO)} links to what does not exist: {broken}"


def test_the_check_finds_a_broken_link_and_only_links(tmp_path):
    (tmp_path / "docs" / "annex").mkdir(parents=True)
    (tmp_path / "docs" / "annex" / "tuning.md").write_text("# tuning\n")
    page = tmp_path / "results" / "README.md"
    page.parent.mkdir()
    page.write_text(
        "[tuning](../docs/annex/tuning.md#best), [old](../docs/tuning.md), "
        '[site](https://example.org/x.md), [here](#top), ![plot](<fig.png> "a plot")\n'
        "`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n[ref]: ../docs/v3.md\n"
    )
    assert broken_links(page) == ["../docs/tuning.md", "fig.png", "../docs/v3.md"]
