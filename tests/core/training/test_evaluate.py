"""`repro evaluate` without --step: a checkpoint's last evaluation step, named, with how its losses
relate to the ones training logged (a checkpoint holds the model before its step's update); a
checkpoint whose losses cannot be numbers is refused in one line."""

import csv
import json
import re
import shutil
import signal

import pytest
import torch
from authors_helpers import write_authors_checkpoint
from conftest import one_line_error
from preemption_helpers import signal_during

from repro.cli.assembly import main
from repro.config import load_run
from repro.runtime import signals
from repro.training.checkpoints import save_checkpoint
from repro.training.loop import make_model, make_optimizer
from repro.training.run import train


@pytest.fixture(scope="module")
def checkpoints(token_dir, tiny_indices, tmp_path_factory):
    """A tiny run stopped at step 8 (an evaluation step: eval_interval 4), then finished: the
    step-8 checkpoint, the final one (13: after step 12's update) and the logged evaluations."""
    monkeypatch = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("evaluate")
    run = load_run("tiny", "baseline")
    signal_during(monkeypatch, 7, signal.SIGTERM)
    with pytest.raises(signals.Preempted, match="at step 8"):
        with signals.stop_signals():
            train(run, token_dir, tiny_indices, root / "run")
    monkeypatch.undo()
    shutil.copyfile(root / "run" / "ckpt.pt", root / "step8.pt")
    train(run, token_dir, tiny_indices, root / "run")
    with open(root / "run" / "metrics.csv") as f:
        logged = {
            int(r["step"]): float(r["eval_val_loss"])
            for r in csv.DictReader(f)
            if r["eval_val_loss"]
        }
    return root / "step8.pt", root / "run" / "ckpt.pt", logged


def evaluate(checkpoint, token_dir, tiny_indices, capsys, *extra):
    args = ["evaluate", "--checkpoint", str(checkpoint), "--preset", "tiny"]
    args += ["--data", str(token_dir), "--indices", str(tiny_indices), "--device", "cpu", *extra]
    assert main(args) == 0
    return capsys.readouterr().out


def result(checkpoint, token_dir, tiny_indices, capsys, *extra) -> dict:
    return json.loads(evaluate(checkpoint, token_dir, tiny_indices, capsys, "--json", *extra))


def test_the_final_checkpoint_is_evaluated_at_the_last_evaluation_step(
    checkpoints, token_dir, tiny_indices, capsys
):
    _, final, logged = checkpoints
    out = evaluate(final, token_dir, tiny_indices, capsys)
    assert "on the evaluation sequences of step 12:" in out
    assert (
        "the checkpoint's model has taken 13 optimiser steps; training's logged evaluation at "
        "step 12 saw the model after 12 steps, so these losses differ from the logged ones"
    ) in out
    evaluated = result(final, token_dir, tiny_indices, capsys)
    assert (evaluated["step"], evaluated["checkpoint_step"]) == (12, 13)
    assert evaluated["eval_val_loss"] != pytest.approx(logged[12], rel=1e-6)


def test_a_checkpoint_at_an_evaluation_step_gives_the_logged_losses(
    checkpoints, token_dir, tiny_indices, capsys
):
    step8, _, logged = checkpoints
    out = evaluate(step8, token_dir, tiny_indices, capsys)
    assert "on the evaluation sequences of step 8:" in out
    assert "has taken 8 optimiser steps: the model training evaluated at step 8" in out
    evaluated = result(step8, token_dir, tiny_indices, capsys)
    assert (evaluated["step"], evaluated["checkpoint_step"]) == (8, 8)
    assert evaluated["eval_val_loss"] == pytest.approx(logged[8], rel=1e-6)
    other = evaluate(step8, token_dir, tiny_indices, capsys, "--step", "4")
    assert "on the evaluation sequences of step 4:" in other and "losses differ" in other


def refused(checkpoint, token_dir, tiny_indices, capsys) -> str:
    args = ["evaluate", "--checkpoint", str(checkpoint), "--preset", "tiny", "--device", "cpu"]
    argv = [*args, "--data", token_dir, "--indices", tiny_indices]
    return one_line_error(capsys, argv, f"^repro: error: {re.escape(str(checkpoint))}: ")


def our_checkpoint(path, change):
    """A checkpoint of ours of the tiny baseline whose weights `change` has altered."""
    run = load_run("tiny", "baseline")
    model = make_model(run, torch.device("cpu"))
    with torch.no_grad():
        change(model)
    config = {"identity": run.identity(), "model": run.identity()["model"]}
    save_checkpoint(path, model, make_optimizer(model, run, False), 8, config)
    return path


def test_an_authors_checkpoint_whose_scale_is_nan_is_refused(
    token_dir, tiny_indices, tmp_path, capsys
):
    run = load_run("tiny", "resgelu-lr3e-3")
    path = tmp_path / "ckpt.pt"
    write_authors_checkpoint(path, make_model(run, torch.device("cpu")), run, 8)
    state = torch.load(path, weights_only=True)
    state["model_args"]["scale"] = float("nan")
    torch.save(state, path)
    assert "model_args scale is nan, not a positive number" in refused(
        path, token_dir, tiny_indices, capsys
    )


def test_a_checkpoint_with_nan_weights_is_refused(token_dir, tiny_indices, tmp_path, capsys):
    def poison(model):
        model.transformer.wpe.weight[0, 0] = float("nan")

    path = our_checkpoint(tmp_path / "ckpt.pt", poison)
    assert "weight transformer.wpe.weight holds NaN" in refused(
        path, token_dir, tiny_indices, capsys
    )


def test_losses_that_overflow_are_refused_not_printed_as_nan(
    token_dir, tiny_indices, tmp_path, capsys
):
    def inflate(model):  # finite weights whose activations overflow float32
        for p in model.parameters():
            p.mul_(1e30)

    path = our_checkpoint(tmp_path / "ckpt.pt", inflate)
    err = refused(path, token_dir, tiny_indices, capsys)
    assert "losses on the evaluation sequences of step 8 are not finite" in err
