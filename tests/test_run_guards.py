"""Nothing that passes the checks breaks later: verified index files, the checkpoints' disk space,
relations between configuration values, the default loss ceiling, Table 1 from what each run
recorded, and a one-line error for each broken input."""

import json
import logging
import math
import shutil
import sys
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from conftest import REPO, one_line_error, random_token_files, train_args

import repro.training.checkpoints as checkpoint_module
from repro.analysis import results
from repro.cli import main
from repro.config import load_experiments, load_preset, load_run
from repro.config.schema import ConfigError
from repro.data.batches import Batches
from repro.data.indices import IndicesError, write_indices
from repro.files import file_sha256
from repro.model import GPT
from repro.rundir import RunError
from repro.training.checkpoints import CheckpointError
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


# ---- 2. batches are verified -----------------------------------------------------------------


def test_an_all_zeros_train_index_file_is_refused_before_training(token_dir, indices, tmp_path):
    starts = np.load(indices / "train.npy")
    replace_array(indices, "train", np.zeros_like(starts))
    with pytest.raises(IndicesError, match=r"train\.npy: SHA-256 differs"):
        train(load_run("tiny", "baseline"), token_dir, indices, tmp_path / "run")
    assert not (tmp_path / "run" / "run.json").exists()


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


# ---- 3. resuming names what differs; 4. disk ---------------------------------------------------


def test_resuming_with_another_configuration_names_the_keys(token_dir, tiny_indices, tmp_path):
    run = load_run("tiny", "baseline")
    train(run, token_dir, tiny_indices, tmp_path / "run")
    (tmp_path / "run" / "run.json").write_text(  # as an interrupted run leaves it
        (tmp_path / "run" / "run.json").read_text().replace('"completed"', '"running"')
    )
    edited = replace(run, optimizer=replace(run.optimizer, lr_max=1e-3))
    with pytest.raises(RunError, match=r"optimizer\.lr_max: 0\.0006 -> 0\.001"):
        train(edited, token_dir, tiny_indices, tmp_path / "run")


def test_too_little_disk_for_checkpoints_is_refused_before_training(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    monkeypatch.setattr(checkpoint_module, "free_bytes", lambda path: 1000)
    with pytest.raises(
        CheckpointError, match=r"run: 1,000 bytes free, its checkpoints need [0-9,]+"
    ):
        train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_a_full_disk_during_a_checkpoint_is_one_line_and_leaves_no_partial(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    def full(state, f):
        f.write(b"PK\x03\x04 half a checkpoint")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4096")

    monkeypatch.setattr(checkpoint_module.torch, "save", full)
    with pytest.raises(CheckpointError, match=r"ckpt\.pt: cannot be written \(\[enforce fail"):
        train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert not list((tmp_path / "run").glob("*.partial"))


def test_a_stale_partial_checkpoint_never_blocks_a_rerun(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    run, run_dir = load_run("tiny", "baseline"), tmp_path / "run"
    run_dir.mkdir()
    stale = b"PK\x03\x04" + bytes(100_000)  # the start of a checkpoint whose write failed
    partial = run_dir / ".ckpt.pt.k3v9x2q1.partial"
    partial.write_bytes(stale)
    # The disk is as full as the stale file left it: room for two checkpoints once it is gone.
    room = 2 * checkpoint_module.checkpoint_bytes(GPT(run.model)) - len(stale)
    free = lambda path: room + (0 if partial.exists() else len(stale))  # noqa: E731
    monkeypatch.setattr(checkpoint_module, "free_bytes", free)
    record = train(run, token_dir, tiny_indices, run_dir)
    assert record.status == "completed" and not list(run_dir.glob("*.partial"))


# ---- 5. relations between values; the default loss ceiling -------------------------------------


def edited_preset(tmp_path, section, **values):
    data = yaml.safe_load((REPO / "config" / "presets" / "tiny.yaml").read_text())
    data[section].update(values)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize(
    "section,values,named",
    [
        (
            "train",
            {"warmup_steps": 12},
            "train.warmup_steps: 12 must be less than train.decay_steps",
        ),
        ("train", {"warmup_steps": 20}, "train.warmup_steps: 20"),
        ("report", {"table_step": 10}, "report.table_step: 10 is not an evaluation step"),
        ("report", {"table_step": 16}, "report.table_step: 16 is not an evaluation step"),
    ],
)
def test_preset_relations_are_checked_on_load(tmp_path, section, values, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_preset(edited_preset(tmp_path, section, **values))


def test_lr_min_above_lr_max_is_refused(tmp_path):
    data = yaml.safe_load((REPO / "config" / "experiments.yaml").read_text())
    data["experiments"]["baseline"]["lr_min"] = 1.0
    (tmp_path / "experiments.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match=r"experiments\.baseline\.lr_min: 1\.0 is more than lr_max"
    ):
        load_experiments(tmp_path / "experiments.yaml")


def test_the_default_loss_ceiling_ends_a_run_that_is_not_learning(
    token_dir, tiny_indices, tmp_path
):
    run = load_run("tiny", "baseline")
    assert run.train.loss_ceiling is None  # the presets leave it to the default
    assert run.loss_ceiling == pytest.approx(math.log(50304) + 1)
    wild = replace(run, optimizer=replace(run.optimizer, lr_max=10.0, lr_min=1.0, weight_decay=0))
    record = train(wild, token_dir, tiny_indices, tmp_path / "run")
    assert record.status == "diverged"


# ---- 3. Table 1 never mislabels --------------------------------------------------------------


def test_table1_shows_the_recorded_configuration_and_flags_an_edited_one(tiny_runs, tmp_path):
    config = shutil.copytree(REPO / "config", tmp_path / "config")
    data = yaml.safe_load((config / "experiments.yaml").read_text())
    data["experiments"]["resgelu-lr3e-3"]["lr_max"] = 0.005  # edited after the run finished
    (config / "experiments.yaml").write_text(yaml.safe_dump(data))
    table = results.table1(tiny_runs, "tiny", config_dir=config).set_index("experiment")
    assert table.at["resgelu-lr3e-3", "lr_max"] == 0.003  # what the run was trained with
    assert table.at["resgelu-lr3e-3", "config_differences"] == "optimizer.lr_max: 0.003 -> 0.005"
    assert (table.drop(index="resgelu-lr3e-3")["config_differences"] == "").all()


# ---- 6. one-line errors ----------------------------------------------------------------------


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


def test_publish_to_a_folder_that_cannot_be_made_is_refused_before_training(
    token_dir, tiny_indices, tmp_path, capsys
):
    (tmp_path / "a-file").write_text("")
    argv = train_args(
        token_dir, tiny_indices, tmp_path / "run", "--publish", tmp_path / "a-file" / "x"
    )
    one_line_error(capsys, argv, r"a-file/x: cannot be created")
    assert not (tmp_path / "run").exists()  # refused before anything was trained


def test_publish_to_a_missing_folder_creates_it(token_dir, tiny_indices, tmp_path):
    published = tmp_path / "results" / "runs" / "tiny" / "baseline"
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", "--publish", published)
    assert main([str(a) for a in argv]) == 0
    assert sorted(p.name for p in published.iterdir()) == ["metrics.csv", "run.json"]
