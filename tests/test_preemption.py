"""Preemption: a stop signal checkpoints at the step boundary, `repro train` exits 75, and the
next attempt resumes to the uninterrupted run's metrics."""

import json
import os
import signal

import pytest
import torch
from test_train import read_metrics, without_timing

import repro.train as train_module
from repro.cli import main
from repro.config import load_run
from repro.rundir import read_record
from repro.runtime import preemption
from repro.train import train


def signal_during(monkeypatch, step, signum):
    """Send `signum` to this process during step `step`'s training step."""
    real_step = train_module.train_step

    def step_signalled(*args, **kwargs):
        if args[3] == step:
            os.kill(os.getpid(), signum)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_step", step_signalled)


def test_a_stop_signal_checkpoints_and_the_next_attempt_resumes(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "split"
    args = [
        "train",
        "--preset",
        "tiny",
        "--experiment",
        "baseline",
        "--data",
        str(token_dir),
        "--indices",
        str(tiny_indices),
        "--out",
        str(out),
        "--stop-signal",
        "USR1",
    ]
    signal_during(monkeypatch, 7, signal.SIGUSR1)
    assert main(args) == preemption.REQUEUE_EXIT == 75
    assert "stopped by SIGUSR1 signal at step 8, checkpointed" in capsys.readouterr().err
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 8  # not the step-5 one
    assert len(read_metrics(out)) == 8
    record = read_record(out)
    assert record.status == "running" and record.last_step == 7

    monkeypatch.undo()  # the next attempt: no signal
    assert main(args) == 0
    assert read_record(out).status == "completed"
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))


def test_sigterm_is_a_stop_signal_by_default(token_dir, tiny_indices, tmp_path, monkeypatch):
    signal_during(monkeypatch, 2, signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(preemption.Preempted, match="SIGTERM signal at step 3"):
        with preemption.stop_signals():
            train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["last_step"] == 2
    assert signal.getsignal(signal.SIGTERM) is before  # the process's own handler is back


def test_an_unknown_stop_signal_is_named(capsys):
    assert (
        main(
            [
                "train",
                "--preset",
                "tiny",
                "--experiment",
                "baseline",
                "--data",
                "d",
                "--indices",
                "i",
                "--out",
                "o",
                "--stop-signal",
                "SIGNOPE",
            ]
        )
        == 2
    )
    assert "--stop-signal: no signal named 'SIGNOPE'" in capsys.readouterr().err
