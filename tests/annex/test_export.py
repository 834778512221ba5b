"""`repro export`: a run's checkpoint as a transformers model folder with its tokenizer and a model
card, loaded back bit for bit by repro.annex.models.hub.load_model; nothing here reaches the network
(tests/annex/test_hf.py loads the folders with transformers)."""

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
import yaml
from conftest import REPO, shortened

import repro
from repro.analysis.runs import read_run
from repro.annex.models.export import QUERIES, export, scale_warning
from repro.annex.models.hub import load_model
from repro.cli.assembly import main
from repro.config import QUERY_MODES, load_experiments, load_run
from repro.errors import ReproError
from repro.model import GPT
from repro.rundir import RunError, read_record
from repro.training.checkpoints import load_checkpoint
from repro.training.run import train

pytest.importorskip("transformers")  # the `hf` extra, which `repro export` needs
PREVIOUS_FORMAT = "a0851ad"  # the last commit whose export wrote ModelConfig's fields alone


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
    load = f'AutoModelForCausalLM.from_pretrained("{out}", trust_remote_code=True)'
    assert f"load it: {load}\n" in capsys.readouterr().out  # the query needs the folder's code
    assert {p.name for p in out.iterdir()} >= {
        "README.md",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "modeling_repro.py",  # residual_gelu is not GPT-2's query: the model's code comes along
        "run.json",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    model = load_model(out)
    saved = load_checkpoint(run_dir / "ckpt.pt")["model"]
    assert model.state_dict().keys() == saved.keys()
    for name, tensor in saved.items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert model.lm_head.weight is model.transformer.wte.weight  # still tied
    assert model.config.query_mode == "residual_gelu" and not model.training
    exported, trained = read_record(out), read_record(run_dir)
    assert (
        exported.identity == trained.identity
        and exported.data["token_files"] == (trained.data["token_files"])
    )


def test_the_card_states_the_evaluation_table_1_s_row_and_the_citation(run_dir, tmp_path):
    card = (export(run_dir, tmp_path / "card") / "README.md").read_text()
    evaluation = card.split("## Evaluation\n", 1)[1].split("\n## ", 1)[0]
    evals = read_run(run_dir).evals()
    assert f"- Validation loss: validation {evals['eval_val_loss'].iloc[-1]:.4f}" in evaluation
    paper = load_experiments().by_name["resgelu-lr3e-3"].paper
    assert f"validation loss {paper.val_loss:.3f} at step 59,000, " in evaluation
    assert f"{paper.rel_improvement:.2%} below the baseline's" in evaluation
    citation = card.split("## Citation\n", 1)[1]
    assert "@inproceedings{karbevski2026nonlinear" in citation and "2603.13381" in citation
    assert 'from_pretrained("card", trust_remote_code=True)' in card
    assert not (tmp_path / "card" / ".eval_results").exists()  # no downstream scores given


def test_the_model_card_says_what_the_model_is(run_dir, tmp_path):
    card = (export(run_dir, tmp_path / "card") / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    assert yaml.safe_load(front) == {  # the Hub's metadata block
        "library_name": "transformers",
        "license": "mit",
        "pipeline_tag": "text-generation",
        "tags": ["gpt2", "causal-lm", "nonlinear-queries", "repro", "custom_code"],
    }
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
        'repro.annex.models.hub.load_model("card")',
        'AutoModelForCausalLM.from_pretrained("card", trust_remote_code=True)',
        "--model_args pretrained=card,trust_remote_code=True --tasks hellaswag",
    ):
        assert text in body, text
    # the last evaluation, at step 4, saw the model before step 4's update: one step earlier
    assert "at step 4 (the model 1 optimiser step(s) before these weights)" in body
    if record.git_commit:
        assert f"git commit {record.git_commit}" in body
    assert set(QUERIES) == set(QUERY_MODES)  # every model's card can say what its query is


def test_a_card_below_the_paper_s_scale_says_it_is_no_evidence(run_dir, tmp_path):
    card = (export(run_dir, tmp_path / "card") / "README.md").read_text()
    title, body = card.split("# card\n\n", 1)[1].split("\n\n", 1)
    assert title.startswith("> **Not the paper's scale.** This model has 2 layers of width 32")
    assert "not evidence for or against the paper's claim" in " ".join(title.split())
    paper = load_run("paper", "resgelu-lr3e-3")
    assert scale_warning(paper.identity(), paper.corpus) == ""
    untied = load_run("paper", "untied-resgelu")  # the authors' longer schedule, same scale
    assert scale_warning(untied.identity(), untied.corpus) == ""
    screen = load_run("screen", "resgelu-lr3e-3")  # the paper's model on a shorter schedule
    assert "trained 6,001 steps on openwebtext" in scale_warning(screen.identity(), screen.corpus)


def test_a_published_run_is_exported_from_its_live_folder(run_dir, tmp_path):
    published = tmp_path / "results" / "runs" / "tiny" / "resgelu"
    shutil.copytree(run_dir, published / "live")
    for name in ("metrics.csv", "run.json"):  # what `repro train --publish` copies up
        shutil.copyfile(run_dir / name, published / name)
    model = load_model(export(published, tmp_path / "model"))
    saved = load_checkpoint(run_dir / "ckpt.pt")["model"]
    assert all(torch.equal(model.state_dict()[name], t) for name, t in saved.items())


def test_what_cannot_be_exported_is_refused_with_one_line(run_dir, tmp_path, capsys):
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(RunError, match="occupied: not empty and not a folder repro export wrote"):
        export(run_dir, occupied)
    assert (occupied / "notes.txt").read_text() == "mine" and len(list(occupied.iterdir())) == 1
    export(run_dir, tmp_path / "model")
    export(run_dir, tmp_path / "model")  # an earlier export is written over
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    assert main(["export", str(run_dir), "--out", str(a_file)]) == 2
    assert "notes.txt: a file, not a folder" in capsys.readouterr().err
    assert a_file.read_text() == "mine"
    no_checkpoint = tmp_path / "imported"
    no_checkpoint.mkdir()
    for name in ("metrics.csv", "run.json"):
        shutil.copyfile(run_dir / name, no_checkpoint / name)
    assert main(["export", str(no_checkpoint), "--out", str(tmp_path / "x")]) == 2
    assert "imported: no ckpt.pt here or in live/" in capsys.readouterr().err
    with pytest.raises(ReproError, match=r"nowhere/config.json: no such file"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "model" / "config.json").write_text('{"n_layer": 2, "width": 3}')  # no type
    with pytest.raises(ReproError, match="config.json: not a model configuration"):
        load_model(tmp_path / "model")


def test_a_folder_of_the_user_s_own_with_a_config_json_is_not_written_over(
    run_dir, tmp_path, capsys
):
    """A folder holding a config.json and a README.md that `repro export` did not write (a model
    of another tool, the user's notes) is refused, its files as they were."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    mine = {"config.json": '{"model_type": "llama"}', "README.md": "my notes"}
    for name, text in mine.items():
        (theirs / name).write_text(text)
    assert main(["export", str(run_dir), "--out", str(theirs)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "theirs: not empty and not a folder repro export" in err
    assert {p.name: p.read_text() for p in theirs.iterdir()} == mine


def test_an_export_names_no_local_folder_and_has_ordinary_permissions(run_dir, tmp_path):
    umask = os.umask(0o022)
    try:
        out = export(run_dir, tmp_path / "model")
    finally:
        os.umask(umask)
    card = (out / "README.md").read_text()
    assert "| preset | `tiny`: config/presets/tiny.yaml |" in card
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["preset_file"] == "config/presets/tiny.yaml"
    for path in out.iterdir():  # what `hf upload` would publish
        assert str(tmp_path) not in path.read_text(errors="replace"), path.name
        assert str(repro_root()) not in path.read_text(errors="replace"), path.name
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name
    assert stat.S_IMODE(out.stat().st_mode) == 0o755


def repro_root():
    return Path(repro.__file__).resolve().parents[2]


def test_an_export_over_links_replaces_them_never_their_targets(run_dir, tmp_path):
    out = export(run_dir, tmp_path / "model")
    targets = {}
    for name in ("run.json", "model.safetensors", "README.md", "config.json", "tokenizer.json"):
        targets[name] = tmp_path / f"precious-{name}"
        # config.json's target: the export's own (the folder stays one export wrote)
        targets[name].write_text((out / name).read_text() if name == "config.json" else "precious")
        (out / name).unlink()
        (out / name).symlink_to(targets[name])
    before = {name: target.read_text() for name, target in targets.items()}
    export(run_dir, out)
    for name, target in targets.items():
        assert target.read_text() == before[name], name
        assert not (out / name).is_symlink(), name
    assert isinstance(load_model(out), GPT)


def test_an_export_that_fails_leaves_no_folder_and_an_earlier_export_whole(
    run_dir, tmp_path, monkeypatch, capsys
):
    def full_disk(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"half")
        raise safetensors.SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    earlier = export(run_dir, tmp_path / "earlier")
    before = {p.name: p.read_bytes() for p in earlier.iterdir()}
    # transformers' save_pretrained writes the weights with safetensors' save_file
    monkeypatch.setattr("transformers.modeling_utils.safe_save_file", full_disk)
    for out in (tmp_path / "new", earlier):
        assert main(["export", str(run_dir), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "No space left on device" in err, err
        assert re.search(rf"{out.name}\.\w+\.partial: cannot be written", err)
    assert not (tmp_path / "new").exists()
    assert {p.name: p.read_bytes() for p in earlier.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]


def test_an_export_that_cannot_write_its_card_is_one_line(run_dir, tmp_path, monkeypatch):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("repro.annex.models.export.model_card", no_space)
    with pytest.raises(ReproError, match=r"README\.md: cannot be written \(No space left"):
        export(run_dir, tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_an_export_never_removes_a_folder_it_did_not_make(run_dir, tmp_path):
    """A user's folder named as the export's own would be (OUT.partial) is not the export's."""
    mine = tmp_path / "model.partial"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    export(run_dir, tmp_path / "model")
    assert (mine / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.partial"]


def test_a_model_the_previous_export_format_wrote_still_loads(tmp_path):
    """A folder as the code of a0851ad wrote it (config.json of ModelConfig's fields alone,
    model.safetensors): that commit's own code writes it in a subprocess."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_FORMAT, "src"], capture_output=True
    )
    assert archive.returncode == 0, (
        f"commit {PREVIOUS_FORMAT} is not in this clone's history (a shallow clone?)"
    )
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    write = (
        "import sys, torch; from repro.config import ModelConfig; from repro.model import GPT; "
        "m = GPT(ModelConfig(n_layer=2, n_head=2, d_model=32, block_size=16, mlp_hidden=64, "
        "query_mode='residual_gelu')); m.save_pretrained(sys.argv[1]); "
        "torch.save(m.state_dict(), sys.argv[1] + '.pt')"
    )
    old = tmp_path / "old"
    env = {"PYTHONPATH": str(tmp_path / "src"), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", write, str(old)], env=env, check=True)
    assert "model_type" not in json.loads((old / "config.json").read_text())
    model, saved = load_model(old), torch.load(f"{old}.pt")
    assert model.config.query_mode == "residual_gelu" and not model.training
    assert all(torch.equal(model.state_dict()[name], t) for name, t in saved.items())
    assert model.lm_head.weight is model.transformer.wte.weight
