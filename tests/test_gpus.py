"""GPU slots (repro.gpus) with fake devices: concurrent processes each get their own GPU."""

import multiprocessing
import os
import signal
from types import SimpleNamespace

import pytest
import torch

from repro import gpus
from repro.gpus import GPUError, claim_gpu

FAKE_GPUS = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]


def _hold(ids, directory, claimed, release):
    """A training job: take a GPU, report which, keep it until told to end."""
    try:
        claimed.put(claim_gpu(ids, directory))
    except GPUError:
        claimed.put("none free")
        return
    release.wait()


class Job:
    context = multiprocessing.get_context("fork")

    def __init__(self, directory):
        self.claimed, self.release = self.context.Queue(), self.context.Event()
        self.process = self.context.Process(
            target=_hold, args=(FAKE_GPUS, directory, self.claimed, self.release))
        self.process.start()

    def gpu(self):
        return self.claimed.get(timeout=60)

    def end(self):
        self.release.set()
        self.process.join(60)


def test_concurrent_jobs_get_distinct_gpus_and_freed_ones_are_reused(tmp_path):
    jobs = [Job(tmp_path) for _ in FAKE_GPUS]
    held = {job.gpu(): job for job in jobs}
    assert sorted(held) == [0, 1, 2]
    assert Job(tmp_path).gpu() == "none free"
    held[1].end()  # a job that finishes frees its GPU ...
    again = Job(tmp_path)
    assert again.gpu() == 1
    os.kill(held[0].process.pid, signal.SIGKILL)  # ... and so does one that is killed
    held[0].process.join(60)
    assert Job(tmp_path).gpu() == 0
    for job in (held[2], again):
        job.end()


def test_a_cuda_device_without_index_is_this_process_own(tmp_path, monkeypatch):
    monkeypatch.setenv(gpus.LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: SimpleNamespace(uuid=FAKE_GPUS[i]))
    monkeypatch.setattr(gpus, "_held", [])
    try:
        assert gpus.claim_device() == torch.device("cuda", 0)
        assert gpus.claim_device() == torch.device("cuda", 1)  # another lock, as another job's
        with pytest.raises(GPUError, match=r"all 2 visible GPUs are held .* --resources gpu=2"):
            gpus.claim_device()
        assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [
            f"gpu-{uuid}.lock" for uuid in FAKE_GPUS[:2]]
    finally:
        for fd in gpus._held:
            os.close(fd)
