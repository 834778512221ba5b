"""Run directories written by the code of earlier commits resume and finish under today's code.

Each old run is made by that commit's own code (git archive of the commit, run in a subprocess):
interrupted at step 7 after its checkpoint at step 5. Today's code must resume it from the
checkpoint and end with the metrics the old code's uninterrupted run wrote. 0d4add5 wrote the
first layout of run.json and presets; 4af7403 the one before the run configuration was resolved
in one object (repro.config.RunConfig).
"""

import subprocess
import sys

import pytest
from conftest import REPO, random_token_files, read_metrics, without_timing

from repro.config import load_run
from repro.rundir import read_record
from repro.training.run import train

pytestmark = pytest.mark.slow  # the old code trains in a subprocess
FIXTURES = REPO / "tests" / "fixtures"
# commit -> (the preset it builds with, the same preset in today's format, its tokens' seed)
LEGACY = {
    "0d4add5": ("preset-0d4add5.yaml", "preset.yaml", 7),
    "4af7403": ("preset.yaml", "preset.yaml", 11),
}
EXPERIMENT = "resgelu-lr3e-3"


@pytest.fixture(scope="module", params=list(LEGACY))
def legacy(request, tmp_path_factory):
    """(the commit's run directories, today's run configuration of them)."""
    commit = request.param
    fixture = FIXTURES / f"legacy-{commit}"
    old_preset, new_preset, seed = LEGACY[commit]
    root = tmp_path_factory.mktemp(f"legacy-{commit}")
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "src", "config"],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"commit {commit} is not in this clone's history "
        f"(a shallow clone?): {archive.stderr.decode()}"
    )
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    out = root / "out"
    random_token_files(out / "data", train_tokens=4000, val_tokens=1000, seed=seed)
    env = {
        "PYTHONPATH": str(root / "src"),
        "REPRO_CONFIG_DIR": str(root / "config"),
        "PATH": "/usr/bin:/bin",
    }
    built = subprocess.run(
        [
            sys.executable,
            str(fixture / f"build_with_{commit}.py"),
            str(out),
            str(fixture / old_preset),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return out, load_run(str(fixture / new_preset), EXPERIMENT)


def test_an_old_run_resumes_and_finishes(legacy):
    old, run = legacy
    interrupted = old / "run"
    before = read_record(interrupted)  # the old record, read in today's layout
    assert before.status == "running"
    assert before.identity == run.identity()

    record = train(run, old / "data", old / "indices", interrupted)

    assert record.status == "completed" and record.last_step == 12
    assert record.started == before.started  # the same run, continued
    assert without_timing(read_metrics(interrupted)) == without_timing(read_metrics(old / "whole"))


def test_a_finished_old_run_is_not_trained_again(legacy):
    old, run = legacy
    whole = old / "whole"
    before = (whole / "metrics.csv").read_bytes()
    record = train(run, old / "data", old / "indices", whole)
    assert record.status == "completed" and (whole / "metrics.csv").read_bytes() == before
