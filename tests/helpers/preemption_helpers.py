"""A stop signal sent to this process during a chosen training step, and what a resumed run's
checkpoint is compared with."""

import os

import torch

import repro.training.loop as loop_module


def signal_during(monkeypatch, step, signum):
    """Send `signum` to this process during step `step`'s training step."""
    real_step = loop_module.train_step

    def step_signalled(*args, **kwargs):
        if args[3] == step:
            os.kill(os.getpid(), signum)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", step_signalled)


def checkpoint_differences(path, other) -> list[str]:
    """Where two checkpoints' contents differ: each tensor bit for bit (dtype and shape too), every
    other value by equality. Not their bytes: torch.save's pickle shares a string written twice
    (a key loaded from a checkpoint is another object than the one the code holds)."""
    return _differences(torch.load(path, weights_only=True), torch.load(other, weights_only=True))


def _differences(a, b, where="") -> list[str]:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return [] if same else [f"{where}: tensors differ"]
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return [f"{where}: keys {list(a)} != {list(b)}"]
        return [d for key in a for d in _differences(a[key], b[key], f"{where}/{key}")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        pairs = enumerate(zip(a, b))
        return [d for i, (x, y) in pairs for d in _differences(x, y, f"{where}[{i}]")]
    return [] if type(a) is type(b) and a == b else [f"{where}: {a!r} != {b!r}"]
