"""The README's two commands are what CI runs, and what it says of conda holds."""

import re

from conftest import REPO


def quick_start_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_ci_runs_exactly_the_readme_set_up_and_test_commands():
    set_up, test = quick_start_commands()[:2]
    ci = (REPO / ".ci" / "run").read_text()
    assert set_up in ci.splitlines()
    assert f"{test} || status=$?" in ci.splitlines()
    # ...and then the tests that the test command leaves out (docs/testing.md)
    assert "  python -m pytest -m slow || status=$?" in ci.splitlines()
    assert "'.[test]'" in set_up and "torch==2.13.0" in set_up


def test_no_rule_has_a_conda_directive():
    # --use-conda is not offered: the environment is created once, by hand (README, Conda).
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        assert "conda:" not in rules.read_text(), rules
