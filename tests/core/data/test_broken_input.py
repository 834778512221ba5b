"""Broken input never starts a run: index files are verified before training (a file of zeros,
another preset's, a wrong shape, starts out of range), and each broken input (index files and
their sidecar, checkpoints, corpora, devices, micro-batches) is one line naming it."""

import json
import logging
import shutil
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import one_line_error, random_token_files, train_args

from repro.config import load_preset, load_run
from repro.data.batches import Batches
from repro.data.indices import IndicesError, write_indices
from repro.files import file_sha256
from repro.training.run import train


@pytest.fixture
def indices(tiny_indices, tmp_path):
    """A copy of the tiny preset's indices, to break."""
    return shutil.copytree(tiny_indices, tmp_path / "indices")


def replace_array(indices_dir, name, array, record_hash=False):
    """Overwrite an index file; with record_hash, also its hash in the sidecar (so that only the
    array's content is wrong)."""
    np.save(indices_dir / f"{name}.npy", array)
    if record_hash:
        sidecar = json.loads((indices_dir / "indices.json").read_text())
        sidecar["sha256"][f"{name}.npy"] = file_sha256(indices_dir / f"{name}.npy")
        (indices_dir / "indices.json").write_text(json.dumps(sidecar))


def test_an_all_zeros_train_index_file_is_refused_before_training(token_dir, indices, tmp_path):
    starts = np.load(indices / "train.npy")
    replace_array(indices, "train", np.zeros_like(starts))
    with pytest.raises(IndicesError, match=r"train\.npy: SHA-256 differs"):
        train(load_run("tiny", "baseline"), token_dir, indices, tmp_path / "run")
    assert not (tmp_path / "run" / "run.json").exists()


def test_a_missing_data_folder_is_refused_before_the_model_is_built(
    tiny_indices, tmp_path, monkeypatch, capsys
):
    """On a GPU, building the model starts CUDA and the micro-batch probe compiles: minutes
    before a misspelt folder would be named."""
    import repro.training.run

    def build(*args):
        pytest.fail("the model was built before the token files were read")

    monkeypatch.setattr(repro.training.run, "build", build)
    argv = train_args(tmp_path / "no-data", tiny_indices, tmp_path / "run")
    one_line_error(capsys, argv, r"no-data/manifest\.json: no such file")


def test_another_presets_train_index_file_is_refused(token_dir, indices, tmp_path):
    write_indices(load_preset("smoke"), token_dir, tmp_path / "smoke")
    shutil.copy(tmp_path / "smoke" / "train.npy", indices / "train.npy")
    with pytest.raises(IndicesError, match=r"train\.npy: SHA-256 differs"):
        Batches.open(token_dir, indices, load_preset("tiny"))


@pytest.mark.parametrize("record_hash", [False, True])
def test_a_wrongly_shaped_eval_index_file_is_refused(token_dir, indices, record_hash):
    replace_array(indices, "eval_val", np.zeros((600, 2), dtype=np.int64), record_hash)
    match = r"int64 array of shape \(600, 2\).* \(600, 4\)" if record_hash else "SHA-256 differs"
    with pytest.raises(IndicesError, match=r"eval_val\.npy: " + match):
        Batches.open(token_dir, indices, load_preset("tiny"))


def test_out_of_range_starts_are_refused(token_dir, indices):
    starts = np.load(indices / "eval_train.npy")
    replace_array(indices, "eval_train", starts + 30_000, record_hash=True)
    with pytest.raises(IndicesError, match=r"eval_train\.npy: starts from .* outside 0\.\.29967"):
        Batches.open(token_dir, indices, load_preset("tiny"))


def missing_index(tmp_path, data, indices):
    (indices / "eval_train.npy").unlink()
    return train_args(data, indices, tmp_path / "run")


def garbage_index(tmp_path, data, indices):
    (indices / "train.npy").write_bytes(b"not an array")
    sidecar = json.loads((indices / "indices.json").read_text())
    sidecar["sha256"]["train.npy"] = file_sha256(indices / "train.npy")
    (indices / "indices.json").write_text(json.dumps(sidecar))
    return train_args(data, indices, tmp_path / "run")


def garbage_sidecar(tmp_path, data, indices):
    (indices / "indices.json").write_text('{"seed": 42}')
    return train_args(data, indices, tmp_path / "run")


def out_of_range(tmp_path, data, indices):
    replace_array(indices, "train", np.load(indices / "train.npy") - 40_000, record_hash=True)
    return train_args(data, indices, tmp_path / "run")


def corrupt_checkpoint(content):
    def make(tmp_path, data, indices):
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "ckpt.pt").write_bytes(content)
        return train_args(data, indices, tmp_path / "run")

    return make


def truncated_checkpoint(tmp_path, data, indices):
    train(load_run("tiny", "baseline"), data, indices, tmp_path / "whole")
    content = (tmp_path / "whole" / "ckpt.pt").read_bytes()
    return corrupt_checkpoint(content[: len(content) // 2])(tmp_path, data, indices)


def corpus(name, write, num_proc=1):
    def make(tmp_path, data, indices):
        path = tmp_path / name
        write(path)
        return [
            "prepare",
            "--data-files",
            str(path),
            "--out",
            str(tmp_path / "tokens"),
            "--expected-docs",
            "3",
            "--num-proc",
            str(num_proc),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]

    return make


def parquet(column):
    return lambda path: pq.write_table(pa.table({"text": column}), path)


def short_val(tmp_path, data, indices):
    random_token_files(tmp_path / "short", val_tokens=20)
    return [
        "indices",
        "--preset",
        "tiny",
        "--data",
        str(tmp_path / "short"),
        "--out",
        str(tmp_path / "ix"),
    ]


ONE_LINE_ERRORS = {
    "missing index file": (missing_index, r"eval_train\.npy: no such file"),
    "garbage index file": (garbage_index, r"train\.npy: not a NumPy array file"),
    "garbage sidecar": (garbage_sidecar, r"indices\.json: missing field\(s\) block_size"),
    "out-of-range starts": (out_of_range, r"train\.npy: starts from -\d+ to"),
    "empty checkpoint": (corrupt_checkpoint(b""), r"ckpt\.pt: not a readable checkpoint"),
    "text checkpoint": (corrupt_checkpoint(b"hello\n"), r"ckpt\.pt: not a readable checkpoint"),
    "truncated checkpoint": (truncated_checkpoint, r"ckpt\.pt: not a readable checkpoint"),
    "not UTF-8": (
        corpus("latin1.txt", lambda p: p.write_bytes("café".encode("latin-1") * 50)),
        r"latin1\.txt: cannot be read as text \(UnicodeDecodeError",
    ),
    "null text": (
        corpus("null.parquet", parquet(["some text", None, "more text"])),
        r"null\.parquet: 1 documents have no text",
    ),
    "integer text": (
        corpus("int.parquet", parquet([1, 2, 3])),
        r"int\.parquet: the 'text' column holds .*int64.*, not strings",
    ),
    "corrupt parquet": (
        corpus("bad.parquet", lambda p: p.write_bytes(b"PAR1 garbage")),
        r"bad\.parquet: cannot be read as parquet",
    ),
    "zero documents": (
        corpus("zero.parquet", parquet(pa.array([], pa.string()))),
        r"zero\.parquet: cannot be read as parquet",
    ),
    "empty jsonl": (
        corpus("empty.jsonl", lambda p: p.write_text("")),
        r"empty\.jsonl: empty file, no documents",
    ),
    "val shorter than the context": (short_val, r"val\.bin: 20 tokens, shorter than a sequence"),
    "device banana": (
        lambda t, d, i: train_args(d, i, t / "run", "--device", "banana"),
        r"device 'banana': not a device",
    ),
    "device cuda without CUDA": (
        lambda t, d, i: train_args(d, i, t / "run", "--device", "cuda"),
        r"device 'cuda': this machine has 0 CUDA device",
    ),
    "num-proc -1": (
        corpus("ok.jsonl", lambda p: p.write_text('{"text": "a"}\n'), num_proc=-1),
        r"--num-proc: -1 is not a number of processes",
    ),
    "micro-batch -2": (
        lambda t, d, i: train_args(d, i, t / "run", "--train-micro-batch", "-2"),
        r"train_micro_batch: -2 does not divide",
    ),
    "micro-batch 0": (
        lambda t, d, i: train_args(d, i, t / "run", "--train-micro-batch", "0"),
        r"train_micro_batch: 0 does not divide",
    ),
}


@pytest.mark.parametrize("case", list(ONE_LINE_ERRORS))
def test_broken_input_is_one_line(case, tmp_path, token_dir, indices, capsys, monkeypatch):
    make, message = ONE_LINE_ERRORS[case]
    if case == "device cuda without CUDA" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    argv = make(tmp_path, token_dir, indices)
    for handler in logging.getLogger("datasets").handlers:  # made under another test's capture
        monkeypatch.setattr(handler, "stream", sys.stderr)
    one_line_error(capsys, argv, message, after_progress=True)
