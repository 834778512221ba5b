"""A run directory written by the code of commit 0d4add5 resumes and finishes under today's code.

The old run is made by that commit's own code (git archive of the commit, run in a subprocess):
interrupted at step 7 after its checkpoint at step 5. Today's code must resume it from the
checkpoint and end with the metrics the old code's uninterrupted run wrote.
"""

import subprocess
import sys

import pytest
from conftest import REPO
from test_train import read_metrics, without_timing

from repro.config import load_run
from repro.rundir import read_record
from repro.train import train

pytestmark = pytest.mark.slow  # the old code trains in a subprocess
LEGACY_COMMIT = "0d4add5"
FIXTURE = REPO / "tests" / "fixtures" / "legacy-0d4add5"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    root = tmp_path_factory.mktemp("legacy")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", LEGACY_COMMIT, "src", "config"],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"commit {LEGACY_COMMIT} is not in this clone's history "
        f"(a shallow clone?): {archive.stderr.decode()}"
    )
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    out = root / "out"
    env = {
        "PYTHONPATH": str(root / "src"),
        "REPRO_CONFIG_DIR": str(root / "config"),
        "PATH": "/usr/bin:/bin",
    }
    built = subprocess.run(
        [
            sys.executable,
            str(FIXTURE / "build_with_0d4add5.py"),
            str(out),
            str(FIXTURE / "preset-0d4add5.yaml"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def test_a_run_of_commit_0d4add5_resumes_and_finishes(legacy):
    interrupted = legacy / "run"
    assert read_record(interrupted).status == "running"  # the old record, read in today's layout
    run = load_run(str(FIXTURE / "preset.yaml"), "resgelu-lr3e-3")
    before = read_record(interrupted)
    assert before.identity == run.identity()

    record = train(run, legacy / "data", legacy / "indices", interrupted)

    assert record.status == "completed" and record.last_step == 12
    assert record.started == before.started  # the same run, continued
    assert without_timing(read_metrics(interrupted)) == without_timing(
        read_metrics(legacy / "whole")
    )


def test_a_finished_run_of_commit_0d4add5_is_not_trained_again(legacy):
    whole = legacy / "whole"
    before = (whole / "metrics.csv").read_bytes()
    record = train(
        load_run(str(FIXTURE / "preset.yaml"), "resgelu-lr3e-3"),
        legacy / "data",
        legacy / "indices",
        whole,
    )
    assert record.status == "completed" and (whole / "metrics.csv").read_bytes() == before
