"""One writer per run: the run lock, SIGTERM, a trainer orphaned by its workflow, prepare's
workers."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, edited_tiny_preset, read_metrics, train_args, without_timing
from hang_guard import run_watched, watch
from processes import alive

from repro.config import load_preset, load_run
from repro.data.indices import write_indices
from repro.rundir import read_record
from repro.runtime.signals import Preempted, stop_signals
from repro.training.run import train

ENV = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
)


@pytest.fixture(scope="module")
def long_run(token_dir, tmp_path_factory):
    """A tiny model with 20,001 steps: a trainer that is still running when the test acts."""
    tmp = tmp_path_factory.mktemp("long")
    train = {"max_step": 20_000, "decay_steps": 20_000, "eval_interval": 1000}
    preset = edited_tiny_preset(tmp, "long.yaml", train=train, report={"table_step": 20_000})
    write_indices(load_preset(preset), token_dir, tmp / "indices")
    return {"preset": preset, "data": str(token_dir), "indices": str(tmp / "indices")}


def train_command(run, out, *extra):
    args = train_args(run["data"], run["indices"], out, *extra, preset=run["preset"])
    return [sys.executable, "-m", "repro", *args]


def wait_for_rows(out: Path, trainer: subprocess.Popen, rows: int = 3) -> None:
    """Until `rows` steps of the run in `out` are logged by `trainer` (or a process under it),
    however long that takes; Hung if it stalls, a failure if it exits first."""
    metrics = out / "metrics.csv"
    logged = lambda: metrics.exists() and len(read_metrics(out)) >= rows
    code = watch(trainer, f"training into {out}", [metrics], until=logged)
    assert code is None, f"{out}: the trainer exited ({code}) before {rows} steps"


def wait_gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.2)
    return not alive(pid)


@pytest.mark.slow  # several processes
def test_a_second_trainer_stops_at_once_naming_the_holder(long_run, tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen(
        train_command(long_run, out), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_rows(out, first)
        second = run_watched(train_command(long_run, out), env=ENV)
        rows = len(read_metrics(out))
        time.sleep(1)
        assert len(read_metrics(out)) >= rows  # metrics.csv was not swapped under the first
    finally:
        first.kill()
        first.wait()
    assert second.returncode == 2, second.stderr
    message = second.stderr.strip().splitlines()[-1]
    assert message.startswith("repro: error: ") and str(out) in message
    assert f"PID {first.pid}" in message and socket.gethostname() in message
    # kill -9 released the lock: the run can be taken again (and resumes).
    resumed = subprocess.Popen(
        train_command(long_run, out),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for_rows(out, resumed, rows + 1)
    finally:
        resumed.kill()
        resumed.wait()


def test_sigterm_checkpoints_and_the_run_resumes_to_the_same_result(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch
):
    run = load_run("tiny", "baseline")

    import repro.training.loop as loop_module

    real_step = loop_module.train_step

    def terminated(*args, **kwargs):
        if args[3] == 7:  # SIGTERM arrives during step 7, between checkpoints (5 and 10)
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(*args, **kwargs)

    def killed(signum, frame):  # what SIGTERM does to a trainer that does not handle it
        raise SystemExit("killed by SIGTERM")

    monkeypatch.setattr(loop_module, "train_step", terminated)
    previous = signal.signal(signal.SIGTERM, killed)
    try:
        with pytest.raises(Preempted, match="stopped by SIGTERM signal at step 8, checkpointed"):
            with stop_signals():  # as `repro train` runs it
                train(run, token_dir, tiny_indices, tmp_path / "split")
        assert signal.getsignal(signal.SIGTERM) is killed  # the trainer's handler is gone
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(read_metrics(tmp_path / "split")) == 8  # steps 0..7, as the checkpoint
    assert read_record(tmp_path / "split").status == "running"
    monkeypatch.setattr(loop_module, "train_step", real_step)
    assert train(run, token_dir, tiny_indices, tmp_path / "split").status == "completed"
    assert without_timing(read_metrics(tmp_path / "split")) == without_timing(
        read_metrics(tiny_baseline_run)
    )


@pytest.mark.slow  # several processes
def test_a_trainer_stops_when_its_workflow_is_killed(long_run, tmp_path):
    """kill -9 of the parent (Snakemake, which execs the trainer) -> the trainer checkpoints and
    stops instead of training on, and publishes nothing."""
    out, log, published = tmp_path / "run", tmp_path / "train.log", tmp_path / "published"
    command = train_command(long_run, out, "--exit-with-parent", "--publish", str(published))
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import subprocess, sys, time
        log = open({str(log)!r}, "w")
        child = subprocess.Popen({command!r}, stdout=log, stderr=subprocess.STDOUT)
        print(child.pid, flush=True)
        time.sleep(600)
        """),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    trainer = int(parent.stdout.readline())
    try:
        wait_for_rows(out, parent)
    finally:
        parent.kill()
        parent.wait()
    assert wait_gone(trainer), "the orphaned trainer is still training"
    assert "stopped by SIGTERM" in log.read_text(), log.read_text()
    # --publish makes its folder before training (a bad one is refused at once): it stays empty
    assert (out / "ckpt.pt").exists() and not any(published.iterdir())
    assert json.loads((out / "run.json").read_text())["status"] == "running"


def children(pid: int) -> list[int]:
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]


@pytest.mark.slow  # several processes
def test_prepare_workers_exit_when_prepare_is_killed():
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent("""
        import os, time
        from repro.data.prepare import worker_pool
        pool = worker_pool(2, None)
        [f.result() for f in [pool.submit(time.sleep, 0.5) for _ in range(4)]]
        print("ready", flush=True)
        time.sleep(600)
        """),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout.readline().strip() == "ready"
    workers = children(parent.pid)
    assert workers
    parent.kill()
    parent.wait()
    assert all(wait_gone(pid, 30) for pid in workers), "prepare's workers outlived it"
