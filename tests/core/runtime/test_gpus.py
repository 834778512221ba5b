"""GPU slots (repro.runtime.gpus) with fake devices: concurrent processes each get their own GPU."""

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO

from repro.runtime import gpus
from repro.runtime.gpus import GPUError

FAKE_GPUS = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]


# A training job: take a GPU, say which, keep it until stdin closes (or the process is killed).
HOLD = """
import sys
from pathlib import Path
from repro.runtime.gpus import GPUError, claim_gpu
wait = float(sys.argv[3]) if len(sys.argv) > 3 else None
try:
    print(claim_gpu(sys.argv[1].split(","), Path(sys.argv[2]), wait), flush=True)
except GPUError:
    print("none free", flush=True)
    sys.exit()
sys.stdin.read()
"""


class Job:
    def __init__(self, directory, *wait, gpus=FAKE_GPUS):
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLD, ",".join(gpus), str(directory), *map(str, wait)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def line(self):
        return self.process.stdout.readline().strip()

    def gpu(self):
        line = self.line()
        return int(line) if line.isdigit() else line

    def end(self):
        self.process.stdin.close()
        self.process.wait(60)


def test_concurrent_jobs_get_distinct_gpus_and_freed_ones_are_reused(tmp_path):
    jobs = [Job(tmp_path) for _ in FAKE_GPUS]
    held = {job.gpu(): job for job in jobs}
    assert sorted(held) == [0, 1, 2]
    assert Job(tmp_path).gpu() == "none free"
    held[1].end()  # a job that finishes frees its GPU ...
    again = Job(tmp_path)
    assert again.gpu() == 1
    held[0].process.kill()  # ... and so does one that is killed
    held[0].process.wait(60)
    last = Job(tmp_path)
    assert last.gpu() == 0
    for job in (held[2], again, last):
        job.end()


def test_a_job_waits_while_every_gpu_is_held(tmp_path):
    """Without --resources gpu=N, surplus GPU jobs queue for a GPU instead of sharing one."""
    held = {job.gpu(): job for job in [Job(tmp_path) for _ in FAKE_GPUS]}
    assert sorted(held) == [0, 1, 2]
    waiting = Job(tmp_path, 0.05)
    assert waiting.line().startswith("all 3 visible GPUs are held by other repro processes: wait")
    held[2].end()
    assert waiting.gpu() == 2
    for job in (held[0], held[1], waiting):
        job.end()


@pytest.fixture
def fake_cuda(tmp_path, monkeypatch):
    """Two fake CUDA devices (FAKE_GPUS[:2]), a lock directory of the test's, no GPU claimed."""
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: SimpleNamespace(uuid=FAKE_GPUS[i])
    )
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: None)
    monkeypatch.setattr(gpus, "_held", [])
    monkeypatch.setattr(gpus, "_claimed", [], raising=False)  # (older code had none)
    yield tmp_path / "locks"
    for fd in gpus._held:
        os.close(fd)


def test_a_cuda_device_without_index_is_this_process_own(fake_cuda, monkeypatch):
    assert gpus.claim_device() == torch.device("cuda", 0)
    monkeypatch.setattr(gpus, "_claimed", [])  # as if another job, in another process
    assert gpus.claim_device() == torch.device("cuda", 1)
    monkeypatch.setattr(gpus, "_claimed", [])
    with pytest.raises(GPUError, match=r"all 2 visible GPUs are held .* --resources gpu=N"):
        gpus.claim_device(wait=False)  # a torchrun rank's claim
    assert sorted(p.name for p in fake_cuda.iterdir()) == [
        f"gpu-{uuid}.lock" for uuid in FAKE_GPUS[:2]
    ]


def test_a_process_that_trains_twice_keeps_its_gpu(fake_cuda, monkeypatch):
    """A second training in one process (a test, a notebook) gets the GPU it holds: a new claim
    would flock the lock file this process already holds, and wait for itself forever."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert gpus.claim_device() == torch.device("cuda", 0)
    assert gpus.claim_device(wait=False) == torch.device("cuda", 0)
    assert len(gpus._held) == 1  # one lock, held once
    assert (
        Job(fake_cuda, gpus=FAKE_GPUS[:1]).gpu() == "none free"
    )  # and still held against other processes


def test_a_gpu_lock_file_that_is_a_link_is_refused_and_its_target_not_made(tmp_path):
    target = tmp_path / "made-through-the-link"
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "gpu-GPU-a.lock").symlink_to(target)
    with pytest.raises(GPUError, match=r"gpu-GPU-a\.lock: a symbolic link, not a GPU's lock file"):
        gpus.claim_gpu(["GPU-a"], tmp_path / "locks", wait=None)
    assert not target.exists()
