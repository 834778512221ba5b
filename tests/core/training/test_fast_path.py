"""The fast training path's settings change speed, never what is trained or recorded.

docs/specification.md §2 lists the fast path."""

import math

import pytest
import torch
from config_helpers import write_preset
from conftest import read_metrics, shortened, without_timing

from repro.config import ConfigError, load_preset, load_run
from repro.data.batches import random_batches
from repro.training.loop import build, with_train_micro_batch
from repro.training.run import train


def test_runtime_micro_batch_and_log_interval():
    paper = load_run("paper", "baseline")
    assert (paper.runtime.train_micro_batch, paper.runtime.log_interval) == ("auto", 10)
    faster = paper.with_runtime(train_micro_batch=24)
    assert random_batches(faster, 1).accumulation == 20  # 480 sequences a step, 24 a pass
    assert faster.train.eval_micro_batch == 12
    assert paper.identity() == faster.identity()  # the same run
    with pytest.raises(ConfigError, match="micro_batch: 7 does not divide train.batch_size = 480"):
        paper.with_runtime(train_micro_batch=7)


def test_runtime_micro_batch_must_divide_the_batch(tmp_path):
    path = write_preset(tmp_path, lambda d: d["runtime"].update(train_micro_batch=3))
    with pytest.raises(
        ConfigError,
        match=rf"^{path}: runtime.train_micro_batch: 3 does not divide train.batch_size = 4$",
    ):
        load_preset(str(path))


def short_run(log_interval=1, **runtime):
    """tiny, cut to steps 0..5 (evaluations at 0 and 4) to keep these tests fast."""
    return shortened(load_run("tiny", "baseline"), 5, log_interval=log_interval, **runtime)


@pytest.fixture(scope="module")
def reference(token_dir, tiny_indices, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    return train(short_run(), token_dir, tiny_indices, out), read_metrics(out)


def test_log_interval_changes_nothing_but_when_rows_are_written(
    reference, token_dir, tiny_indices, tmp_path
):
    record = train(short_run(log_interval=4), token_dir, tiny_indices, tmp_path)
    assert record.status == "completed" and record.last_step == 5
    assert record.identity == reference[0].identity
    assert without_timing(read_metrics(tmp_path)) == without_timing(reference[1])


def test_micro_batch_is_a_runtime_setting(reference, token_dir, tiny_indices, tmp_path):
    """Another micro-batch: the same run (same identity), the same losses up to rounding, and
    evaluation still over the preset's micro-batches (its std is a per-micro-batch statistic)."""
    record = train(short_run(train_micro_batch=4), token_dir, tiny_indices, tmp_path)
    assert record.identity == reference[0].identity
    assert (record.train_micro_batch, reference[0].train_micro_batch) == (4, 2)
    rows = read_metrics(tmp_path)
    for key in ("train_loss", "eval_val_loss", "eval_val_std"):
        for ours, theirs in zip(rows, reference[1]):
            assert (ours[key] == theirs[key] == "") or float(ours[key]) == pytest.approx(
                float(theirs[key]), rel=1e-4
            )
    with pytest.raises(ConfigError, match="micro_batch: 3 does not divide train.batch_size = 4"):
        train(short_run(train_micro_batch=3), token_dir, tiny_indices, tmp_path / "mb3")


def test_divergence_is_found_at_its_exact_step_between_flushes(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    import repro.training.loop as loop_module

    real_step = loop_module.train_step

    def nan_at_step_2(*args, **kwargs):
        loss = real_step(*args, **kwargs)
        return loss * math.nan if args[3] == 2 else loss  # args[3]: the step

    monkeypatch.setattr(loop_module, "train_step", nan_at_step_2)
    record = train(
        short_run(log_interval=4), token_dir, tiny_indices, tmp_path
    )  # steps 0-3: one flush
    assert record.status == "diverged" and record.diverged_step == 2 and record.last_step == 2
    rows = read_metrics(tmp_path)
    assert [int(r["step"]) for r in rows] == [0, 1, 2] and rows[2]["train_loss"] == "nan"


def test_auto_micro_batch_keeps_the_evaluations_on_cpu():
    auto = load_run("tiny", "baseline", train_micro_batch="auto")
    resolved = with_train_micro_batch(auto, build(auto, torch.device("cpu")))
    assert resolved.runtime.train_micro_batch == auto.train.eval_micro_batch == 2
    assert resolved.identity() == auto.identity()  # the same run
