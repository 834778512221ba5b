""".ci/run's last line totals every test its pytest runs ran, from the JUnit XML of its own suites
and from the output of a script that runs pytest inside it (the GPU validation's CPU mode)."""

import re
import subprocess
import sys

import pytest
from conftest import REPO

TESTS = """
import pytest

def test_passes(): pass
def test_passes_too(): pass
def test_fails(): assert False
@pytest.mark.skip(reason="shown skipped")
def test_skipped(): pass
def test_deselected(): pass
@pytest.fixture
def broken(): raise RuntimeError
def test_errors(broken): pass
"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A real pytest run's JUnit XML and its output, as a script would print it after its own."""
    folder = tmp_path_factory.mktemp("reports")
    (folder / "test_some.py").write_text(TESTS)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "not deselected"]
        + ["-o", "addopts=", f"--junitxml={folder / 'some.xml'}", str(folder / "test_some.py")],
        capture_output=True,
        text=True,
    )
    assert "1 failed, 2 passed, 1 skipped, 1 deselected, 1 error in" in result.stdout, result.stdout
    (folder / "script.log").write_text("gpu validation: stage A\n" + result.stdout + "done\n")
    return folder


def tally(*reports):
    return subprocess.run(
        [sys.executable, str(REPO / ".ci" / "tally.py"), *map(str, reports)],
        capture_output=True,
        text=True,
    )


# pytest's own last line: "==== 1 failed, 2 passed, 1 skipped in 0.12s ====".
PYTEST_SUMMARY = re.compile(
    r"^=+ (\d+ passed, \d+ failed, \d+ skipped) in \d+\.\d\ds \(ci: every suite\) =+$"
)


def counts(result):
    """The counts of the tally's one line, which must have the form of pytest's summary."""
    match = PYTEST_SUMMARY.match(result.stdout)
    assert match and result.stdout.count("\n") == 1, result.stdout
    return match.group(1)


def test_the_xml_and_the_output_count_the_same_and_errors_fail(reports):
    for report in ("some.xml", "script.log"):
        result = tally(reports / report)
        assert counts(result) == "2 passed, 2 failed, 1 skipped"
        assert result.returncode == 1


def test_suites_add_up_and_one_that_did_not_run_counts_nothing(reports):
    result = tally(reports / "some.xml", reports / "script.log", reports / "absent.xml")
    assert counts(result) == "4 passed, 4 failed, 2 skipped"


def test_a_reader_of_the_last_pytest_summary_reads_the_total(reports, tmp_path):
    """A log whose last suite skipped everything still ends in the total: read as pytest's own
    summary (by the tally itself), the last line counts what every suite ran."""
    total = tally(reports / "some.xml", reports / "script.log").stdout
    log = tmp_path / "ci.log"
    log.write_text("16 skipped, 612 deselected in 3.25s\n" + total)
    last = [line for line in log.read_text().splitlines() if re.search(r" in [\d.]+s\b", line)][-1]
    assert re.search(r"4 passed, 4 failed, 2 skipped in \d+\.\d\ds", last)
    (tmp_path / "last.log").write_text(last + "\n")
    assert counts(tally(tmp_path / "last.log")) == "4 passed, 4 failed, 2 skipped"


def test_all_passed_is_success_and_no_test_run_is_a_failure(tmp_path):
    (tmp_path / "passed.log").write_text("12 passed, 3 skipped, 433 deselected in 9.81s\n")
    result = tally(tmp_path / "passed.log")
    assert (counts(result), result.returncode) == ("12 passed, 0 failed, 3 skipped", 0)
    assert " in 9.81s " in result.stdout
    (tmp_path / "none.log").write_text("433 deselected in 1.20s\n")
    assert tally(tmp_path / "none.log").returncode == 1
