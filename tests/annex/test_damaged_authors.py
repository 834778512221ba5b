"""The authors' damaged artefacts never end as an imported run with wrong data, nor in a
traceback: the import checks their loss tensors and checkpoint, `repro evaluate` their checkpoint's
model configuration and weights, and a re-import killed part way leaves no completed record beside
partial rows."""

import os
import signal
import subprocess
import sys

import pytest
import torch
from authors_helpers import authors_folder
from conftest import REPO, edit_checkpoint, one_line_error

from repro.cli.assembly import main
from repro.config import load_run

RUN = load_run("tiny", "baseline")


def import_args(folder, out):
    return ["import-authors-run", folder, "--out", out, "--preset", "tiny"]


def set_tensor(name, row, column, value, dtype=None):
    def edit(folder):
        tensor = torch.load(folder / name, weights_only=True)
        tensor[row, column] = value
        torch.save(tensor if dtype is None else tensor.to(dtype), folder / name)

    return edit


def edit_authors_checkpoint(edit):
    return lambda folder: edit_checkpoint(folder / "ckpt.pt", edit)


def wrong_authors_shape(state):
    state["model"]["_orig_mod.transformer.wte.weight"] = torch.zeros(7, 32)


AUTHORS_DAMAGE = {
    "NaN eval loss": (
        set_tensor("eval_val_tensor.pt", 1, 1, float("nan")),
        r"eval_val_tensor\.pt: row 1 \(step 4\) holds .*nan.* had not diverged",
    ),
    "infinite eval loss": (
        set_tensor("eval_train_tensor.pt", 2, 1, float("inf")),
        r"eval_train_tensor\.pt: row 2 \(step 8\) holds .*inf",
    ),
    "negative train loss": (
        set_tensor("tensor.pt", 3, 0, -1.0),
        r"tensor\.pt: row 3, column 0 is -1\.0",
    ),
    "bool tensor": (
        set_tensor("tensor.pt", 0, 0, 1.0, torch.bool),
        r"tensor\.pt: holds torch\.bool, not floating-point",
    ),
    "complex tensor": (
        set_tensor("eval_val_tensor.pt", 0, 0, 1.0, torch.complex64),
        r"eval_val_tensor\.pt: holds torch\.complex64",
    ),
    "iter_num 'abc'": (
        edit_authors_checkpoint(lambda s: s.update(iter_num="abc")),
        r"ckpt\.pt: iter_num is 'abc', not a step",
    ),
    "model_args without n_layer": (
        edit_authors_checkpoint(lambda s: s["model_args"].pop("n_layer")),
        r"ckpt\.pt: model_args lack n_layer",
    ),
    "0 heads": (
        edit_authors_checkpoint(lambda s: s["model_args"].update(num_heads=0)),
        r"ckpt\.pt: model_args num_heads is 0, not a positive integer",
    ),
    "a string layer count": (
        edit_authors_checkpoint(lambda s: s["model_args"].update(n_layer="2")),
        r"ckpt\.pt: model_args n_layer is '2'",
    ),
    "a checkpoint that is a named pipe": (
        lambda folder: (folder.joinpath("ckpt.pt").unlink(), os.mkfifo(folder / "ckpt.pt")),
        r"ckpt\.pt: not a regular file",
    ),
}


@pytest.fixture
def folder(tmp_path):
    return authors_folder(tmp_path, RUN)


@pytest.mark.parametrize("damage", list(AUTHORS_DAMAGE))
def test_damaged_authors_artefacts_are_refused_by_the_import(damage, folder, tmp_path, capsys):
    edit, pattern = AUTHORS_DAMAGE[damage]
    edit(folder)
    one_line_error(capsys, import_args(folder, tmp_path / "out"), pattern)
    assert not (tmp_path / "out" / "run.json").exists()


EVALUATE_DAMAGE = {
    "model_args without n_embd": (
        lambda s: s["model_args"].pop("n_embd"),
        r"ckpt\.pt: model_args lack n_embd",
    ),
    "0 heads": (lambda s: s["model_args"].update(num_heads=0), r"num_heads is 0"),
    "a string layer count": (lambda s: s["model_args"].update(n_layer="2"), r"n_layer is '2'"),
    "a vocabulary of 1e12": (
        lambda s: s["model_args"].update(vocab_size=10**12),
        r"ckpt\.pt: weight transformer\.wte\.weight has shape \(50304, 32\), the model's "
        r"\(1000000000000, 32\)",
    ),
    "a float vocabulary": (
        lambda s: s["model_args"].update(vocab_size=1e12),
        r"ckpt\.pt: its model configuration is not a model",
    ),
    "no weights": (lambda s: s.pop("model"), r"ckpt\.pt: weights are a NoneType, not a mapping"),
    "weights that are a list": (
        lambda s: s.update(model=[1, 2]),
        r"ckpt\.pt: weights are a list, not a mapping",
    ),
    "a wrongly shaped weight": (
        wrong_authors_shape,
        r"transformer\.wte\.weight has shape \(7, 32\)",
    ),
    "iter_num 'abc'": (lambda s: s.update(iter_num="abc"), r"ckpt\.pt: iter_num is 'abc'"),
}


@pytest.mark.parametrize("damage", list(EVALUATE_DAMAGE))
def test_damaged_authors_checkpoints_are_refused_by_evaluate(
    damage, folder, token_dir, tiny_indices, capsys
):
    edit, pattern = EVALUATE_DAMAGE[damage]
    edit_checkpoint(folder / "ckpt.pt", edit)
    argv = ["evaluate", "--checkpoint", folder / "ckpt.pt", "--preset", "tiny"]
    one_line_error(capsys, [*argv, "--data", token_dir, "--indices", tiny_indices], pattern)


KILLED_IMPORT = """
import csv, os, signal, sys
from repro.cli.assembly import main
rows, real = [], csv.DictWriter._dict_to_list
def row_then_die(self, row):
    rows.append(row)
    if len(rows) == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, row)
csv.DictWriter._dict_to_list = row_then_die
main(sys.argv[1:])
"""


def test_a_reimport_killed_part_way_leaves_no_completed_record_beside_partial_rows(
    folder, tmp_path
):
    out = tmp_path / "out"
    assert main([str(a) for a in import_args(folder, out)]) == 0
    imported = (out / "metrics.csv").read_bytes()
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IMPORT, *map(str, import_args(folder, out))],
        env=os.environ | {"PYTHONPATH": path},
    )
    assert killed.returncode == -signal.SIGKILL
    if (out / "run.json").exists():  # then beside the whole import's rows
        assert (out / "metrics.csv").read_bytes() == imported
