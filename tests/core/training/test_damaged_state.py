"""Damaged run state never ends as a "completed" run with wrong data, nor in a traceback: resume
checks metrics.csv and the checkpoint, `repro evaluate` our checkpoints, token values are checked
against the vocabulary, a corpus line that is not UTF-8 is named, and `repro status` reports a
damaged run beside the others (the authors' artefacts: test_damaged_authors.py)."""

import os
import re
import shutil

import numpy as np
import pytest
import torch
from conftest import edit_checkpoint, one_line_error, read_metrics, train_args, without_timing

from repro.cli.assembly import main
from repro.config import load_run
from repro.data.tokens import write_token_files
from repro.rundir import read_record
from repro.runtime import signals
from repro.training.run import train

RUN = load_run("tiny", "baseline")


@pytest.fixture(scope="module")
def runs(token_dir, tiny_indices, tmp_path_factory):
    """A tiny run stopped with its checkpoint at step 8 (rows 0-7 logged); the whole one is the
    session's tiny_baseline_run."""
    root = tmp_path_factory.mktemp("runs")
    asked, real = [], signals.requested
    signals.requested = lambda: len(asked.append(1) or asked) > 8  # stop at step 8
    try:
        with pytest.raises(signals.Preempted):
            train(RUN, token_dir, tiny_indices, root / "stopped")
    finally:
        signals.requested = real
    return root


@pytest.fixture
def stopped(runs, tmp_path):
    """A copy of the stopped run, to damage."""
    return shutil.copytree(runs / "stopped", tmp_path / "stopped")


# ---- metrics.csv on resume ------------------------------------------------------------------


def lines_of(text):
    return text.splitlines(keepends=True)


METRICS_DAMAGE = {  # name: (damage to the text of metrics.csv, the error)
    "last row cut mid-row": (lambda t: t[: len(t) - 40], r"holds rows of steps 0\.\.6, .* step 8"),
    "last row cut between digits": (lambda t: t[:-4], r"metrics\.csv: holds rows of steps 0\.\.6"),
    "a row cut to '2'": (
        lambda t: "".join(lines_of(t)[:3] + ["2\r\n"] + lines_of(t)[4:]),
        r"line 4: 1 fields",
    ),
    "rows 3-4 deleted": (
        lambda t: "".join(lines_of(t)[:4] + lines_of(t)[6:]),
        r"line 5: step '5', expected 3",
    ),
    "a row repeated": (
        lambda t: "".join(lines_of(t)[:4] + lines_of(t)[3:]),
        r"line 5: step '2', expected 3",
    ),
    "empty file": (lambda t: "", r"metrics\.csv: empty, but the checkpoint is at step 8"),
    "header only": (lambda t: lines_of(t)[0], r"metrics\.csv: holds no row, .* step 8"),
    "a garbage value": (
        lambda t: t.replace(lines_of(t)[3].split(",")[2], "banana", 1),
        r"line 4: train_loss 'banana' is not a number",
    ),
}


@pytest.mark.parametrize("damage", list(METRICS_DAMAGE))
def test_a_damaged_metrics_csv_is_refused_on_resume(
    damage, stopped, token_dir, tiny_indices, capsys
):
    edit, pattern = METRICS_DAMAGE[damage]
    path = stopped / "metrics.csv"
    path.write_bytes(edit(path.read_bytes().decode()).encode())
    damaged = path.read_bytes()
    one_line_error(capsys, train_args(token_dir, tiny_indices, stopped), pattern)
    assert path.read_bytes() == damaged  # nothing rewritten
    assert read_record(stopped).status == "running"


def test_a_missing_metrics_csv_is_refused_on_resume(stopped, token_dir, tiny_indices, capsys):
    (stopped / "metrics.csv").unlink()
    one_line_error(
        capsys,
        train_args(token_dir, tiny_indices, stopped),
        r"metrics\.csv: no such file, but the checkpoint is at step 8",
    )


def test_rows_past_the_checkpoint_and_a_cut_last_line_are_dropped(
    tiny_baseline_run, stopped, token_dir, tiny_indices
):
    """Rows of steps the checkpoint has not taken, the last one cut by a crash, are recomputed:
    the resumed run equals the uninterrupted one."""
    whole = (tiny_baseline_run / "metrics.csv").read_text()
    with open(stopped / "metrics.csv", "a", newline="") as f:
        f.write("".join(lines_of(whole)[9:11]) + lines_of(whole)[11][:17])
    assert main(train_args(token_dir, tiny_indices, stopped)) == 0
    assert without_timing(read_metrics(stopped)) == without_timing(read_metrics(tiny_baseline_run))
    assert read_record(stopped).status == "completed"


# ---- the checkpoint on resume ---------------------------------------------------------------


def wrong_shape(state):
    state["model"]["transformer.wpe.weight"] = torch.zeros(3, 5)


CHECKPOINT_DAMAGE = {
    "step 10**6": (lambda s: s.update(step=10**6), r"ckpt\.pt: step 1000000, outside .*0\.\.13"),
    "step -3": (lambda s: s.update(step=-3), r"ckpt\.pt: .* without a valid step"),
    "step '8'": (lambda s: s.update(step="8"), r"ckpt\.pt: .* without a valid step"),
    "no config": (lambda s: s.pop("config"), r"ckpt\.pt: .* without a valid config"),
    "empty optimizer state": (
        lambda s: s.update(optimizer={}),
        r"ckpt\.pt: .* without a valid optimizer",
    ),
    "no optimizer moments": (
        lambda s: s["optimizer"].update(state={}),
        r"ckpt\.pt: optimizer state for 0 of the model's 15 parameters at step 8",
    ),
    "a wrongly shaped weight": (
        wrong_shape,
        r"ckpt\.pt: weight transformer\.wpe\.weight has shape \(3, 5\)",
    ),
    "a missing weight": (
        lambda s: s["model"].pop("lm_head.weight"),
        r"ckpt\.pt: weights do not match the model \(missing: lm_head\.weight",
    ),
    "an earlier release's second model section, edited": (
        lambda s: s["config"].update(model=s["config"]["identity"]["model"] | {"n_head": 7}),
        r"ckpt\.pt: its model configuration differs from the run's identity in n_head",
    ),
    "no model in the identity": (
        lambda s: s["config"]["identity"].pop("model"),
        r"ckpt\.pt: .* without a valid config",
    ),
}


def test_a_checkpoint_holds_its_model_configuration_once(runs):
    config = torch.load(runs / "stopped" / "ckpt.pt", weights_only=True)["config"]
    assert set(config) == {"identity"} and isinstance(config["identity"]["model"], dict)


def test_an_earlier_release_s_checkpoint_with_both_sections_resumes(
    tiny_baseline_run, stopped, token_dir, tiny_indices
):
    edit_checkpoint(
        stopped / "ckpt.pt", lambda s: s["config"].update(model=s["config"]["identity"]["model"])
    )
    assert main(train_args(token_dir, tiny_indices, stopped)) == 0
    assert without_timing(read_metrics(stopped)) == without_timing(read_metrics(tiny_baseline_run))


@pytest.mark.parametrize("damage", list(CHECKPOINT_DAMAGE))
def test_a_damaged_checkpoint_is_refused_on_resume(
    damage, stopped, token_dir, tiny_indices, capsys
):
    edit, pattern = CHECKPOINT_DAMAGE[damage]
    edit_checkpoint(stopped / "ckpt.pt", edit)
    metrics = (stopped / "metrics.csv").read_bytes()
    one_line_error(capsys, train_args(token_dir, tiny_indices, stopped), pattern)
    assert (stopped / "metrics.csv").read_bytes() == metrics
    assert read_record(stopped).status == "running"


def test_a_checkpoint_that_is_a_named_pipe_is_refused(stopped, token_dir, tiny_indices, capsys):
    (stopped / "ckpt.pt").unlink()
    os.mkfifo(stopped / "ckpt.pt")
    one_line_error(
        capsys, train_args(token_dir, tiny_indices, stopped), r"ckpt\.pt: not a regular file"
    )


@pytest.mark.parametrize(
    "content,pattern",
    [("[1, 2]", r"run\.json: not a run record \(a list"), ('{"status": "running"}', "run record")],
)
def test_a_damaged_run_json_is_refused(stopped, token_dir, tiny_indices, capsys, content, pattern):
    (stopped / "run.json").write_text(content)
    one_line_error(capsys, train_args(token_dir, tiny_indices, stopped), pattern)


# ---- repro status ---------------------------------------------------------------------------


def test_status_reports_a_damaged_run_and_lists_the_others(tmp_path, capsys, write_run):
    runs = tmp_path / "runs"
    write_run(runs / "tiny" / "baseline", "baseline", {0: 6.0, 12: 5.0}, last_step=12)
    damaged = write_run(runs / "tiny" / "mlp4.75", "mlp4.75", {0: 6.0}, last_step=12)
    with open(damaged / "metrics.csv", "a") as f:
        f.write("garbage,line\n")
    (
        write_run(runs / "tiny" / "identity", "identity", {0: 6.0}, last_step=3) / "run.json"
    ).write_text("[]")
    assert main(["status", "--runs-dir", str(runs), "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    # preset, seed, experiment, status, ...
    table = {line.split()[2]: line for line in out.splitlines() if line.split()[0] == "tiny"}
    assert "completed" in table["baseline"] and "12/" in table["baseline"]
    assert "damaged" in table["mlp4.75"] and "damaged" in table["identity"]
    assert re.search(r"mlp4\.75.*metrics\.csv, line 15", out)
    assert re.search(r"identity.*run\.json: not a run record", out)


# ---- token values ---------------------------------------------------------------------------


def test_token_values_outside_the_vocabulary_are_refused(tmp_path, capsys):
    val = np.zeros(6_000, dtype=np.uint16)
    val[1234] = 50304
    data = tmp_path / "data"
    write_token_files(
        data,
        {"train": np.zeros(30_000, dtype=np.uint16), "val": val},
        documents={"train": 300, "val": 60},
        source={"kind": "test"},
        tokenizer={"name": "gpt2"},
    )
    pattern = r"val\.bin: token 1,234 is 50304, outside the vocabulary \(0\.\.50256\)"
    one_line_error(capsys, ["verify", "--data", data], pattern)
    argv = ["indices", "--preset", "tiny", "--data", data, "--out", tmp_path / "indices"]
    one_line_error(capsys, argv, pattern)
    assert not (tmp_path / "indices" / "indices.json").exists()


@pytest.mark.parametrize("damage", ["no config", "step '8'", "a wrongly shaped weight"])
def test_damaged_checkpoints_of_ours_are_refused_by_evaluate(
    damage, stopped, token_dir, tiny_indices, capsys
):
    edit, pattern = CHECKPOINT_DAMAGE[damage]
    edit_checkpoint(stopped / "ckpt.pt", edit)
    argv = ["evaluate", "--checkpoint", stopped / "ckpt.pt", "--preset", "tiny", "--step", "8"]
    one_line_error(capsys, [*argv, "--data", token_dir, "--indices", tiny_indices], pattern)


# ---- a corpus that is not UTF-8 -------------------------------------------------------------


def test_a_corpus_line_that_is_not_utf8_is_one_line_naming_file_and_line(tmp_path, capsys):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_bytes(b'{"text": "some text"}\n{"text": "bad \xff\xfe bytes"}\n{"text": "more"}\n')
    argv = ["prepare", "--data-files", corpus, "--out", tmp_path / "tokens", "--expected-docs", "3"]
    argv += ["--num-proc", "1", "--cache-dir", tmp_path / "cache"]
    pattern = r"bad\.jsonl, line 2: text with bytes that are not UTF-8"
    one_line_error(capsys, argv, pattern, after_progress=True)
    assert not (tmp_path / "tokens" / "manifest.json").exists()
