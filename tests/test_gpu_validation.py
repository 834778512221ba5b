"""The GPU validation's step runner (benchmarks/gpu/steps.py): a step past its deadline is killed
with everything it started, and a stage killed at any moment keeps every finished step's outcome
in its JSON (docs/gpu.md)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

from steps import Stage  # noqa: E402 (the benchmark's folder is no package)


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie not yet reaped counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s")


def test_a_step_past_its_deadline_is_killed_with_its_children_and_recorded(tmp_path):
    stage = Stage("X", tmp_path, budget=600)
    # A step that starts a child of its own, says so, then sleeps far past its 2 s deadline.
    sleeper = (
        "import subprocess, time; child = subprocess.Popen(['sleep', '60']); "
        "print('child', child.pid, flush=True); time.sleep(60)"
    )
    began = time.monotonic()
    outcome = stage.run("sleeper", [sys.executable, "-c", sleeper], limit=2)
    assert time.monotonic() - began < 15
    assert outcome["status"] == "timed out" and outcome["exit"] is None
    record = json.loads((tmp_path / "X.json").read_text())
    assert record["steps"]["sleeper"]["status"] == "timed out"  # on disk at once
    log = (tmp_path / "X.log").read_text()
    child = int(log.split("\nchild ")[1].split()[0])  # its output reached the log before the kill
    wait_for(lambda: gone(child), 10)  # the whole process group went
    assert stage.finish() == 1


def test_a_step_within_its_deadline_is_ok_or_failed_by_its_exit_status(tmp_path):
    stage = Stage("X", tmp_path, budget=600)
    assert stage.run("ok", [sys.executable, "-c", "print('hello')"])["status"] == "ok"
    assert stage.run("fails", [sys.executable, "-c", "raise SystemExit(3)"])["exit"] == 3
    assert stage.run("expected", [sys.executable, "-c", "exit(75)"], expect=75)["status"] == "ok"
    assert stage.finish() == 1
    record = json.loads((tmp_path / "X.json").read_text())
    assert record["failed_steps"] == ["fails"] and "hello" in (tmp_path / "X.log").read_text()


def test_a_second_run_keeps_the_steps_it_skips_and_starts_none_past_the_budget(tmp_path):
    first = Stage("X", tmp_path, budget=600)
    first.run("done", [sys.executable, "-c", "print('measured')"])
    first.finish()
    again = Stage("X", tmp_path, budget=10, skip=["done"])
    again.run("done", [sys.executable, "-c", "raise SystemExit(1)"])
    again.run("late", [sys.executable, "-c", "pass"], minimum=60)
    assert again.finish() == 0
    steps = json.loads((tmp_path / "X.json").read_text())["steps"]
    assert steps["done"]["status"] == "ok" and steps["done"]["exit"] == 0  # the first run's
    assert steps["late"] == {"status": "skipped", "reason": "stage time budget spent"}


@pytest.mark.slow
def test_killing_validate_sh_mid_stage_keeps_the_finished_steps(tmp_path):
    """The whole command killed, as a GPU window's time limit does, while its second step runs."""
    out = tmp_path / "out"
    env = os.environ | {"PYTHON": sys.executable, "REPRO_VALIDATE_SCRATCH": str(tmp_path / "s")}
    command = [REPO / "benchmarks/gpu/validate.sh", "A", "--device", "cpu", "--out", out]
    validate = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:

        def probing():
            steps = json.loads((out / "A.json").read_text())["steps"] if out.exists() else {}
            return steps.get("probe", {}).get("status") == "running" and steps

        steps = wait_for(probing, 300)
    finally:
        os.killpg(validate.pid, signal.SIGKILL)
        validate.wait()
    record = json.loads((out / "A.json").read_text())
    environment = record["steps"]["environment"]
    assert environment["status"] == "ok" and environment["imports"]["repro.train"] == "ok"
    assert record["steps"]["probe"]["status"] == "running"  # where the stage was cut
    wait_for(lambda: gone(steps["probe"]["pid"]), 10)  # the step died with its stage
    assert "=== stage A" in (out / "A.log").read_text()
