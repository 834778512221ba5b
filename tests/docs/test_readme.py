"""The README's two commands are what CI runs, and what it says of conda holds."""

import re
import subprocess
import sys

import pytest
from conftest import REPO


def quick_start_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_ci_runs_exactly_the_readme_set_up_and_test_commands():
    set_up, test, slow = quick_start_commands()[:3]
    venv, install = set_up.splitlines()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    # The same set-up in a virtual environment of CI's own, activated before anything installs.
    assert venv == "python3 -m venv .venv && . .venv/bin/activate"
    assert ci.index(venv.replace(".venv", ".venv-ci")) < ci.index(install)
    assert "'.[test]'" in install and "torch==2.13.0" in install
    # The test command, then the tests that it leaves out (docs/testing.md), each writing the
    # JUnit XML that CI's last line totals.
    assert f'{test} --junitxml="$reports/quick.xml" || status=$?' in ci
    assert f'  {slow} --junitxml="$reports/slow.xml" || status=$?' in ci


def test_the_set_up_installs_torch_without_cuda():
    # pip's default torch on Linux is the CUDA build, several GB a machine without a GPU never uses:
    # the block a newcomer copies installs the CPU build.
    install = quick_start_commands()[0].splitlines()[1]
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu &&" in install
    testing = (REPO / "docs" / "testing.md").read_text()
    assert re.search(r"```bash\n(.*?)```", testing, re.S)[1].strip() == quick_start_commands()[0]


def test_no_rule_has_a_conda_directive():
    # --use-conda is not offered: the environment is created once, by hand (README, Conda).
    for rules in (REPO / "workflow" / "rules").rglob("*.smk"):
        assert "conda:" not in rules.read_text(), rules


def layout() -> dict[str, str]:
    """The README's layout block: each folder or file it describes, with its description."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    return dict(line.split(None, 1) for line in block.splitlines() if " " in line.strip())


def test_the_layout_lists_every_rule_file_and_notebook():
    listed = layout()
    folders = ("workflow/rules/", "workflow/rules/annex/", "notebooks/")
    for folder, pattern in zip(folders, ("*.smk", "*.smk", "*.ipynb")):
        names = {p.stem for p in (REPO / folder).glob(pattern)}
        assert set(listed[folder].split(", ")) == names, folder


def test_the_layout_lists_every_module_and_package_of_the_library():
    listed = " ".join(f"{k} {v}" for k, v in layout().items()).split()
    library = REPO / "src" / "repro"
    modules = {p.name for p in library.glob("*.py")} - {"__init__.py", "__main__.py"}
    packages = {f"{p.name}/" for p in library.iterdir() if (p / "__init__.py").exists()}
    assert modules | packages <= set(listed)


@pytest.mark.slow  # pytest-xdist in a process of its own: its controller and a worker
def test_the_test_command_shows_each_test_as_it_starts_and_ends(tmp_path):
    (tmp_path / "test_some.py").write_text("def test_one():\n    pass\n")
    config = [
        "-c",
        str(REPO / "pyproject.toml"),
        "--rootdir",
        str(tmp_path),
        "-p",
        "no:cacheprovider",
    ]
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", *config, "-n", "1", str(tmp_path / "test_some.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert "test_some.py::test_one \n" in shown  # started
    assert re.search(r"\[gw\d\] \[100%\] PASSED .*test_some.py::test_one", shown), shown
