"""The `large` preset: GPT-3 Large's shape on the paper's data, batch, schedule and evaluation
(docs/scale.md), with the paper's indices and its cost from `repro describe`."""

from dataclasses import replace

import pytest
from conftest import random_token_files

from repro.analysis.results import scale_caveat
from repro.annex.perf.cost import describe
from repro.config import load_preset, load_run
from repro.data.indices import write_indices


def test_large_is_gpt3_large_on_the_papers_training():
    large, paper = load_preset("large"), load_preset("paper")
    m = large.model
    assert (m.n_layer, m.n_head, m.d_model, m.block_size) == (24, 16, 1536, 1024)
    # the paper's training, with the audit's divergence stop (the authors had none)
    assert (large.train.divergence_margin, paper.train.divergence_margin) == (0.5, None)
    assert replace(large.train, divergence_margin=None) == paper.train
    assert large.corpus == paper.corpus and large.report == paper.report
    assert load_run("large", "resgelu-lr3e-3").model.head_size == 96


def test_large_draws_the_papers_indices(tmp_path):
    data = random_token_files(tmp_path / "data", train_tokens=50_000, val_tokens=5_000)
    large = write_indices(load_preset("large"), data, tmp_path / "large")
    paper = write_indices(load_preset("paper"), data, tmp_path / "paper")
    assert large["sha256"] == paper["sha256"]  # the same index files, byte for byte


def test_what_a_large_run_costs():
    cost = describe(load_run("large", "baseline"))
    assert cost["total_params"] == 758_392_320
    assert cost["gpu_hours"] == pytest.approx(103.4, abs=0.1)  # at 40% of an H100's peak
    paper = describe(load_run("paper", "baseline"))
    assert cost["gpu_hours"] / paper["gpu_hours"] == pytest.approx(5.84, abs=0.01)


def test_its_numbers_say_they_are_one_size_up():
    assert "a larger model than the paper's (24 layers, d_model 1536)" in scale_caveat(
        load_preset("large")
    )
