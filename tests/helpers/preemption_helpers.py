"""A stop signal sent to this process during a chosen training step."""

import os

import repro.training.loop as loop_module


def signal_during(monkeypatch, step, signum):
    """Send `signum` to this process during step `step`'s training step."""
    real_step = loop_module.train_step

    def step_signalled(*args, **kwargs):
        if args[3] == step:
            os.kill(os.getpid(), signum)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", step_signalled)
