"""`repro export`: a run's checkpoint as safetensors + config.json + a model card, loaded back bit
for bit by GPT.from_pretrained; nothing here reaches the network."""

import shutil

import pytest
import torch
import yaml
from conftest import shortened

import repro
from repro.checkpoint import load_checkpoint
from repro.cli import main
from repro.config import QUERY_MODES, load_run
from repro.errors import ReproError
from repro.export import QUERIES, export
from repro.model import GPT
from repro.rundir import RunError, read_record
from repro.train import train


@pytest.fixture(scope="module")
def run_dir(token_dir, tiny_indices, tmp_path_factory):
    """A residual_gelu run (query MLP, tied embeddings) of 5 steps, evaluated at 0 and 4."""
    run = shortened(load_run("tiny", "resgelu-lr3e-3"), 4)
    out = tmp_path_factory.mktemp("runs") / "resgelu"
    train(run, token_dir, tiny_indices, out)
    return out


def test_an_exported_run_loads_back_bit_for_bit(run_dir, tmp_path, capsys):
    out = tmp_path / "resgelu-tiny"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    assert "GPT.from_pretrained" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [
        "README.md",
        "config.json",
        "model.safetensors",
        "run.json",
    ]
    model = GPT.from_pretrained(out)
    saved = load_checkpoint(run_dir / "ckpt.pt")["model"]
    assert model.state_dict().keys() == saved.keys()
    for name, tensor in saved.items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied
    assert model.config.query_mode == "residual_gelu" and not model.training
    assert read_record(out) == read_record(run_dir)


def test_the_model_card_says_what_the_model_is(run_dir, tmp_path):
    card = (export(run_dir, tmp_path / "card") / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    assert yaml.safe_load(front)["license"] == "mit"  # the Hub's metadata block
    record = read_record(run_dir)
    for text in (
        "Beyond Linearity in Attention Projections: The Case for Nonlinear Queries",
        "arXiv:2603.13381",
        "`residual_gelu`: q = (x + f(x)) / 2",
        "`tiny`",
        "python-docs, 30,000 train tokens, 6,000 val tokens",
        "5 optimiser steps (run status: completed)",
        f"| tokens | {5 * record.tokens_per_step:,} ",
        f"repro {repro.__version__}",
        "| license | MIT |",
        'GPT.from_pretrained("card")',
    ):
        assert text in body, text
    # the last evaluation, at step 4, saw the model before step 4's update: one step earlier
    assert "at step 4 (the model 1 optimiser step(s) before these weights)" in body
    if record.git_commit:
        assert f"git commit {record.git_commit}" in body
    assert set(QUERIES) == set(QUERY_MODES)  # every model's card can say what its query is


def test_a_published_run_is_exported_from_its_live_folder(run_dir, tmp_path):
    published = tmp_path / "results" / "runs" / "tiny" / "resgelu"
    shutil.copytree(run_dir, published / "live")
    for name in ("metrics.csv", "run.json"):  # what `repro train --publish` copies up
        shutil.copyfile(run_dir / name, published / name)
    model = GPT.from_pretrained(export(published, tmp_path / "model"))
    saved = load_checkpoint(run_dir / "ckpt.pt")["model"]
    assert all(torch.equal(model.state_dict()[name], t) for name, t in saved.items())


def test_what_cannot_be_exported_is_refused_with_one_line(run_dir, tmp_path, capsys):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="occupied: not empty and not an earlier export"):
        export(run_dir, occupied)
    assert (occupied / "notes.txt").read_text() == "mine" and len(list(occupied.iterdir())) == 1
    export(run_dir, tmp_path / "model")
    export(run_dir, tmp_path / "model")  # an earlier export is written over
    no_checkpoint = tmp_path / "imported"
    no_checkpoint.mkdir()
    for name in ("metrics.csv", "run.json"):
        shutil.copyfile(run_dir / name, no_checkpoint / name)
    assert main(["export", str(no_checkpoint), "--out", str(tmp_path / "x")]) == 2
    assert "imported: no ckpt.pt here or in live/" in capsys.readouterr().err
    with pytest.raises(ReproError, match=r"nowhere/config.json: no such file"):
        GPT.from_pretrained(tmp_path / "nowhere")
    (tmp_path / "model" / "config.json").write_text('{"n_layer": 2, "width": 3}')
    with pytest.raises(ReproError, match="config.json: not a model configuration"):
        GPT.from_pretrained(tmp_path / "model")
