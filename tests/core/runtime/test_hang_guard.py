"""The tests' guard against a hang (hang_guard): a job that is slow but makes progress runs to
its end, however long; one that stalls is killed and named; a failed shared set-up is reported
once. Tiny scripts stand for the jobs, with a quiet window of seconds."""

import sys
import time

import pytest
from hang_guard import Hung, run_watched
from workflow_helpers import SetUpFailure, failure, jobs_said, shared

# The jobs' pauses (0.7 s) leave 0.8 s to a busy machine's scheduling; their runs twice as long.
QUIET_S = 1.5


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.slow  # a job of its own, run for seconds past the quiet window
def test_a_job_that_prints_slowly_runs_past_the_quiet_window():
    start = time.monotonic()
    slow = "import time\nfor i in range(6):\n    print(i, flush=True); time.sleep(0.7)"
    result = run_watched(python(slow), quiet_s=QUIET_S)
    assert result.returncode == 0 and result.stdout.split() == list("012345")
    assert time.monotonic() - start > 2 * QUIET_S


@pytest.mark.slow  # a job of its own, run for seconds past the quiet window
def test_a_silent_job_that_computes_runs_past_the_quiet_window():
    busy = "import time\nend = time.monotonic() + 4\nwhile time.monotonic() < end: pass"
    assert run_watched(python(busy), quiet_s=QUIET_S).returncode == 0


@pytest.mark.slow  # a job of its own, run for seconds past the quiet window
def test_a_job_that_writes_its_log_file_runs_past_the_quiet_window(tmp_path):
    log = tmp_path / "train.log"
    writes = (
        f"import time\nfor i in range(6):\n    open({str(log)!r}, 'a').write('.'); time.sleep(0.7)"
    )
    assert run_watched(python(writes), quiet_s=QUIET_S, logs=[log]).returncode == 0


@pytest.mark.slow  # a job and its child, stalled until the guard kills them
def test_a_stalled_job_is_killed_and_named():
    # a Snakemake log whose job then sleeps: the guard names the rule and its wildcards
    stalls = (
        "import subprocess, sys, time\n"
        "print('rule train:\\n    wildcards: experiment=baseline\\n    jobid: 3', flush=True)\n"
        "subprocess.run([sys.executable, '-c', 'import time; time.sleep(600)'])"
    )
    start = time.monotonic()
    with pytest.raises(Hung) as hung:
        run_watched(python(stalls), what="the fake workflow", quiet_s=QUIET_S, describe=jobs_said)
    assert time.monotonic() - start < 60
    message = str(hung.value)
    assert message.startswith("the fake workflow: no output and no CPU time for 2 s, killed.")
    assert "still running: rule train (experiment=baseline) jobid 3" in message
    assert "time.sleep(600)" in message  # the process it was waiting on


def test_a_failed_workflow_names_the_job_that_failed():
    log = (
        "localrule train:\n    wildcards: experiment=mlp4.75\n    jobid: 7\n"
        "Error in rule train:\n    message: None\n    jobid: 7\n"
        "Complete log(s): .snakemake/log/x.snakemake.log\n"
    )
    said = failure(type("Result", (), {"returncode": 1, "stdout": log, "stderr": ""}))
    assert said.startswith("snakemake exited 1; failed: rule train (experiment=mlp4.75) jobid 7")
    assert said.endswith("Complete log(s): .snakemake/log/x.snakemake.log")


def test_a_failed_shared_set_up_is_reported_once():
    set_up = SetUpFailure("snakemake exited 1; failed: rule train jobid 7")
    with pytest.raises(pytest.fail.Exception, match="rule train jobid 7"):
        shared(set_up)
    for _ in range(6):
        with pytest.raises(pytest.skip.Exception, match="reported once"):
            shared(set_up)
    assert shared("workdir") == "workdir"
