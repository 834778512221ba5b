"""The GPU validation's step runner (benchmarks/gpu/steps.py): a step past its deadline is killed
with everything it started, a step within it is ok or failed by its exit status, a second run
keeps the steps it skips and starts none past the budget; and the lines CI reads as warnings or
errors where nothing failed."""

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

from processes import alive, wait_for  # noqa: E402
from steps import Stage, alarming  # noqa: E402


def test_ci_finds_the_lines_that_read_as_warnings_or_errors():
    """The lines CI refuses where nothing failed (steps.alarming), and those it keeps."""
    false_alarms = [
        "ERROR:2026-11-25 21:07:00 10136:10136 DeviceProperties.cpp:48] gpuGetDeviceCount failed",
        "W1125 20:59:41.191000 6098 torch/utils/cpp_extension.py:140] No CUDA runtime is found",
        "  torch/jit/_script.py:365: DeprecationWarning: `torch.jit.script_method` is deprecated",
        "validate: this Python cannot import: jsonschema (ModuleNotFoundError: No module named)",
        "26 passed, 9 skipped, 15 warnings in 82.52s (0:01:22)",
    ]
    fine = [
        "validate: this Python cannot import: jsonschema (not installed)",
        "tests/core/training/test_gpu.py::test_a_probe_error_that_is_not_memory_is_raised"
        " PASSED [ 85%]",
        "import tensorboard.compat.proto.event_pb2: ok",
        "26 passed, 9 skipped in 168.52s (0:02:48)",
    ]
    assert alarming("\n".join(false_alarms + fine)) == false_alarms


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
    wait_for(lambda: not alive(child), 10)  # the whole process group went
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
