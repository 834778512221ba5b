"""What fits this machine's memory (repro.runtime.fit): a run is refused before allocating where
its weights and training state or one evaluation micro-batch's logits cannot fit at all."""

from conftest import train_args
from test_inputs import one_line_error

from repro.config import load_run
from repro.runtime import fit


def test_evaluation_logits_that_cannot_fit_are_refused_before_training(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    """Room for the weights, their gradients and AdamW's moments, not for the logits of one
    evaluation micro-batch (eval_micro_batch x block_size x vocabulary floats)."""
    run = load_run("tiny", "baseline")
    logits = 4 * run.train.eval_micro_batch * run.model.block_size * run.model.vocab_size
    state = fit.TRAINING_COPIES * fit.weight_bytes(run.model)
    monkeypatch.setattr(fit, "physical_memory", lambda: state + logits - 1)
    one_line_error(
        train_args(token_dir, tiny_indices, tmp_path / "run"),
        capsys,
        r"training baseline at preset tiny needs [0-9.]+ GiB, more than the [0-9.]+ GiB of this "
        r"machine's cpu memory",
    )
    assert not (tmp_path / "run" / "metrics.csv").exists()
