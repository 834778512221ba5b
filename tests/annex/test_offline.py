"""`repro downstream` without the Hugging Face hub, end to end: a process of its own, as a user
starts it, with none of the offline switches set (conftest sets them for the tests' own
processes) and the hub's address one where nothing listens."""

import os
import socket
import subprocess
import sys

import pytest
from conftest import REPO
from downstream_helpers import HUB_TASK

from repro.runtime import network


@pytest.mark.slow  # lm-eval indexes its tasks, then loads them
def test_downstream_offline_is_one_line_without_retries(tiny_baseline_run, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "hub.yaml").write_text(HUB_TASK)  # a task whose data only the hub has
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # closed once the block ends: nothing listens there
    env = {k: v for k, v in os.environ.items() if k not in (*network.OFFLINE, *network.PROXIES)}
    env |= {"HF_ENDPOINT": f"http://127.0.0.1:{port}", "PYTHONPATH": str(REPO / "src")}
    argv = ["downstream", "--checkpoint", str(tiny_baseline_run / "ckpt.pt"), "--task", "repro_hub"]
    argv += ["--include-path", str(tasks), "--out", str(tmp_path / "out")]
    result = subprocess.run(
        [sys.executable, "-m", "repro", *argv], env=env, capture_output=True, text=True
    )
    said = (result.stdout + result.stderr).splitlines()
    assert result.returncode == 2, result.stderr
    errors = [s for s in said if s.startswith("repro: error:") or "Traceback" in s]
    assert len(errors) == 1 and errors[0].startswith("repro: error: task repro_hub: "), said
    assert "neither in the datasets cache nor reachable" in errors[0]
    assert [s for s in said if "retry" in s.lower() or "retries" in s.lower()] == [], said
    assert not (tmp_path / "out").exists()
