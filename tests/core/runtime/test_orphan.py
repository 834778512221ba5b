"""A trainer whose parent (Snakemake) is killed while the trainer is still importing torch stops
without publishing: --exit-with-parent is armed before the heavy imports."""

import json
import os
import signal
import sys

import pytest
from conftest import REPO
from hang_guard import run_watched

# Started by the test through REAPER: starts `repro train`, waits until the trainer is loading
# torch (the window in which the parent death signal can be missed), then dies by SIGKILL.
PARENT = """
import os, signal, subprocess, sys, time
trainer = subprocess.Popen([sys.executable, "-m", "repro", *sys.argv[1:]])
print(trainer.pid, flush=True)
while "torch" not in open(f"/proc/{trainer.pid}/maps").read():
    time.sleep(0.002)
os.kill(os.getpid(), signal.SIGKILL)
"""
# Adopts the orphaned trainer (a subreaper), so that its end can be waited for; prints it.
REAPER = """
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
parent = subprocess.Popen([sys.executable, "-c", *sys.argv[1:]], stdout=subprocess.PIPE)
trainer = int(parent.stdout.readline())
parent.wait()
_, status = os.waitpid(trainer, 0)
print(json.dumps({"parent": parent.returncode, "signal": os.WTERMSIG(status) if
                  os.WIFSIGNALED(status) else None, "exit": os.WEXITSTATUS(status)}))
"""


@pytest.mark.slow  # three processes: a subreaper, a parent killed, its trainer
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_parent_killed_while_the_trainer_imports_torch_stops_it(
    token_dir, tiny_indices, tmp_path
):
    out, publish = tmp_path / "live", tmp_path / "published"
    train = ["train", "--preset", "tiny", "--experiment", "baseline", "--data", str(token_dir)]
    train += ["--indices", str(tiny_indices), "--out", str(out), "--publish", str(publish)]
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    reaped = run_watched(
        [sys.executable, "-c", REAPER, PARENT, *train, "--exit-with-parent"],
        env=os.environ | {"PYTHONPATH": path},
    )
    ended = json.loads(reaped.stdout.splitlines()[-1])
    assert ended["parent"] == -signal.SIGKILL
    assert ended["signal"] == signal.SIGTERM or ended["exit"] == 75, ended  # stopped, not done
    assert not (publish / "run.json").exists() and not (publish / "metrics.csv").exists()
