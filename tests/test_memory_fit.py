"""What fits this machine's memory (repro.runtime.fit): a run is refused before allocating where
its weights and training state or one evaluation micro-batch's logits cannot fit at all."""

import torch
from conftest import one_line_error, train_args

from repro.config import load_run
from repro.runtime import fit, memory
from repro.training.checkpoints import save_checkpoint
from repro.training.loop import make_model, make_optimizer


def test_evaluation_logits_that_cannot_fit_are_refused_before_training(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    """Room for the weights, their gradients and AdamW's moments, not for the logits of one
    evaluation micro-batch (eval_micro_batch x block_size x vocabulary floats)."""
    run = load_run("tiny", "baseline")
    logits = 4 * run.train.eval_micro_batch * run.model.block_size * run.model.vocab_size
    state = fit.TRAINING_COPIES * fit.weight_bytes(run.model)
    monkeypatch.setattr(memory, "physical_memory", lambda: state + logits - 1)
    one_line_error(
        capsys,
        train_args(token_dir, tiny_indices, tmp_path / "run"),
        r"training baseline at preset tiny needs [0-9.]+ GiB, more than the [0-9.]+ GiB of this "
        r"machine's cpu memory",
    )
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_evaluating_where_its_logits_cannot_fit_is_one_line(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    run = load_run("tiny", "baseline")
    model = make_model(run, torch.device("cpu"))
    checkpoint = tmp_path / "ckpt.pt"
    config = {"identity": run.identity(), "model": run.identity()["model"]}
    save_checkpoint(checkpoint, model, make_optimizer(model, run.optimizer, False), 4, config)
    monkeypatch.setattr(memory, "physical_memory", lambda: fit.evaluation_logits_bytes(run) - 1)
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--preset", "tiny", "--step", "4"]
    one_line_error(
        capsys,
        [*argv, "--data", str(token_dir), "--indices", str(tiny_indices), "--device", "cpu"],
        rf"evaluating {checkpoint} needs [0-9.]+ GiB, more than",
    )
