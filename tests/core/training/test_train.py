"""Optimiser, schedule, fixed indices and the training run (docs/specification.md §2, §6)."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import (
    random_token_files,
    read_metrics,
    shortened,
    without_timing,
)

from repro.config import load_preset, load_run
from repro.data.batches import Batches
from repro.data.indices import IndicesError, draw_indices
from repro.model import GPT
from repro.rundir import RunError, read_record
from repro.training.loop import Schedule, make_optimizer
from repro.training.run import train

PAPER = Schedule(lr_max=6e-4, lr_min=6e-5, warmup_steps=2000, decay_steps=60002, kind="cosine")


def cosine(step):  # §2, written out
    ratio = (step - 2000) / (60002 - 2000)
    return 6e-5 + 0.5 * (1 + math.cos(math.pi * ratio)) * (6e-4 - 6e-5)


@pytest.mark.parametrize(
    "step,expected",
    [
        (0, 6e-4 * 1 / 2001),
        (1999, 6e-4 * 2000 / 2001),
        (2000, 6e-4),
        (31001, cosine(31001)),
        (60002, 6e-5),
        (60003, 6e-5),
        (10**6, 6e-5),
    ],
)
def test_learning_rate_schedule(step, expected):
    assert PAPER(step) == pytest.approx(expected, rel=1e-12)
    assert PAPER(31001) == pytest.approx((6e-4 + 6e-5) / 2)  # the cosine's midpoint


def test_weight_decay_only_on_matrices_and_embeddings():
    run = load_run("tiny", "resgelu-lr3e-3")
    model = GPT(run.model)
    optimizer = make_optimizer(model, run, fused_kernel=False)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 2**-5 and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(
        p.dim() == 1 for p in no_decay["params"]
    )
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    assert optimizer.defaults["betas"] == (0.9, 0.95) and optimizer.defaults["eps"] == 1e-8


def test_indices_are_the_authors_draws():
    """§6: seed 42; train (rows, 480); fresh seed 42 for eval-train then eval-val (600, 2400)."""
    n_train, n_val = 9_035_582_489, 4_434_606  # the authors' token counts
    got = draw_indices(
        n_train,
        n_val,
        train_rows=3,
        sequences_per_step=480,
        eval_rows=600,
        eval_sequences=2400,
        block_size=1024,
    )
    g = torch.Generator().manual_seed(42)
    authors_train = torch.randint(
        n_train - 1024, (50, 480), generator=g
    )  # more rows: same first rows
    g = torch.Generator().manual_seed(42)
    authors_eval_train = torch.randint(n_train - 1024, (600, 2400), generator=g)
    authors_eval_val = torch.randint(n_val - 1024, (600, 2400), generator=g)
    np.testing.assert_array_equal(got["train"], authors_train[:3].numpy())
    np.testing.assert_array_equal(got["eval_train"], authors_eval_train.numpy())
    np.testing.assert_array_equal(got["eval_val"], authors_eval_val.numpy())
    assert got["train"].dtype == np.int64


def test_batches_are_windows_of_the_token_file(token_dir, tiny_indices):
    preset = load_preset("tiny")
    batches = Batches.open(token_dir, tiny_indices, preset)
    x, y = batches.get("train", 3, 1)
    tokens = np.fromfile(token_dir / "train.bin", dtype=np.uint16)
    starts = np.load(tiny_indices / "train.npy")[3, 2:4]  # micro-batch 1 of 2 sequences
    for row, start in enumerate(starts):
        np.testing.assert_array_equal(x[row].numpy(), tokens[start : start + 32])
        np.testing.assert_array_equal(y[row].numpy(), tokens[start + 1 : start + 33])
    assert x.dtype == torch.int64
    xv, _ = batches.get("eval_val", 2, 0)
    val = np.fromfile(token_dir / "val.bin", dtype=np.uint16)
    start = np.load(tiny_indices / "eval_val.npy")[2, 0]
    np.testing.assert_array_equal(xv[0].numpy(), val[start : start + 32])


def test_indices_for_other_token_files_are_refused(tmp_path, tiny_indices):
    other = random_token_files(tmp_path / "other", seed=1)
    with pytest.raises(
        IndicesError, match=r"indices\.json was drawn for a train\.bin .* but .*other/train\.bin"
    ):
        Batches.open(other, tiny_indices, load_preset("tiny"))


def test_a_run_writes_metrics_and_run_json(token_dir, tiny_indices, tmp_path):
    run = load_run("tiny", "resgelu-lr3e-3")
    record = train(run, token_dir, tiny_indices, tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    assert [int(r["step"]) for r in rows] == list(range(13))
    evals = [int(r["step"]) for r in rows if r["eval_val_loss"]]
    assert evals == [0, 4, 8, 12]
    assert float(rows[0]["eval_val_loss"]) == pytest.approx(math.log(50304), rel=0.05)  # untrained
    assert all(math.isfinite(float(r["train_loss"])) for r in rows)
    assert int(rows[-1]["tokens_seen"]) == 13 * 4 * 32
    saved = read_record(tmp_path / "run")
    assert saved == record
    assert saved.status == "completed" and saved.last_step == 12
    assert saved.params["non_embedding_params"] > 0
    assert saved.data["token_files"]["train"]["tokens"] == 30_000
    saved_json = json.loads((tmp_path / "run" / "run.json").read_text())
    for key in ("git_commit", "package_version", "torch_version", "device", "indices", "format"):
        assert key in saved_json
    # A finished run is never trained again.
    again = train(run, token_dir, tiny_indices, tmp_path / "run")
    assert again == saved and read_metrics(tmp_path / "run") == rows


def test_interrupted_run_resumes_to_the_same_result(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch
):
    run = load_run("tiny", "baseline")

    import repro.training.loop as loop_module

    real_step = loop_module.train_step

    def interrupted(*args, **kwargs):
        if args[3] == 7:  # the step argument: die part-way, after the checkpoint at step 5
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(run, token_dir, tiny_indices, tmp_path / "split")
    assert json.loads((tmp_path / "split" / "run.json").read_text())["status"] == "running"
    assert len(read_metrics(tmp_path / "split")) == 7
    monkeypatch.setattr(loop_module, "train_step", real_step)
    record = train(run, token_dir, tiny_indices, tmp_path / "split")

    assert record.status == "completed"
    assert without_timing(read_metrics(tmp_path / "split")) == without_timing(
        read_metrics(tiny_baseline_run)
    )
    # train.log holds both sessions: appended on resume, never overwritten.
    log = (tmp_path / "split" / "train.log").read_text()
    assert log.index("starting at step 0/12") < log.index("resuming at step 5/12")
    assert "step 3/12 | train loss" in log and "step 12/12 | train loss" in log


def test_divergence_ends_the_run_cleanly(token_dir, tiny_indices, tmp_path):
    run = load_run("tiny", "baseline")
    diverging = replace(run, train=replace(run.train, loss_ceiling=1.0))
    record = train(diverging, token_dir, tiny_indices, tmp_path / "run")
    assert record.status == "diverged" and record.diverged_step == 0
    assert json.loads((tmp_path / "run" / "run.json").read_text())["diverged_step"] == 0


def test_a_run_directory_of_another_configuration_is_not_overwritten(
    token_dir, tiny_indices, tmp_path
):
    train(load_run("tiny", "identity"), token_dir, tiny_indices, tmp_path / "run")
    before = (tmp_path / "run" / "metrics.csv").read_bytes()
    with pytest.raises(RunError, match="holds a run of another configuration"):
        train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert (tmp_path / "run" / "metrics.csv").read_bytes() == before


def test_run_json_records_the_training_micro_batch_as_the_number_trained_with(
    token_dir, tiny_indices, tmp_path
):
    """`auto` is resolved before anything is recorded: on CPU the evaluation's micro-batch."""
    run = shortened(load_run("tiny", "baseline", train_micro_batch="auto"), 1)
    train(run, token_dir, tiny_indices, tmp_path)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["train_micro_batch"] == 2
    assert record["config"]["runtime"]["train_micro_batch"] == 2
    assert record["sessions"][0]["train_micro_batch"] == 2
