"""Nothing that passes the checks breaks later: resuming names what differs, the checkpoints' disk
space, relations between configuration values, the default loss ceiling, Table 1 from what each
run recorded, and a publish folder checked before training (index files and other broken input:
test_broken_input.py)."""

import math
import os
import shutil
from dataclasses import replace

import pytest
import yaml
from conftest import (
    REPO,
    edited_tiny_preset,
    one_line_error,
    read_metrics,
    train_args,
    without_timing,
)
from preemption_helpers import checkpoint_differences

import repro.training.checkpoints as checkpoint_module
from repro.analysis import results
from repro.cli.assembly import main
from repro.config import load_experiments, load_preset, load_run
from repro.config.schema import ConfigError
from repro.model import GPT
from repro.rundir import RunError
from repro.training.checkpoints import CheckpointError
from repro.training.run import train

# ---- resuming names what differs; disk ---------------------------------------------------------


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


def test_the_checkpoints_space_is_a_checkpoints_size(token_dir, tiny_indices, tmp_path):
    """The estimate is the checkpoint's size (the tied embedding written once, as torch.save
    writes a shared tensor), not a third more: a disk where two fit is not refused."""
    run = load_run("tiny", "baseline")
    train(run, token_dir, tiny_indices, tmp_path / "run")
    written = (tmp_path / "run" / "ckpt.pt").stat().st_size
    estimate = checkpoint_module.checkpoint_bytes(GPT(run.model))
    assert written * 0.98 < estimate < written * 1.02, (estimate, written)


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


def test_a_disk_that_fills_during_a_checkpoint_keeps_the_last_one_and_the_run_resumes(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capsys
):
    """The disk fills while step 10's checkpoint is written: its file's writes get the kernel's
    ENOSPC (the partial file's descriptor becomes /dev/full). One line names ckpt.pt and the
    cause; step 5's checkpoint stays, byte for byte, with no partial file beside it; once there is
    room the same command ends as the run never stopped, checkpoint and all."""
    import repro.files

    out = tmp_path / "run"
    new_partial, kept = repro.files.new_partial, {}

    def filling(path):
        partial, fd = new_partial(path)
        if path == out / "ckpt.pt" and path.exists():  # the second checkpoint: step 10's
            kept["bytes"] = path.read_bytes()
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, fd)
            os.close(full)
        return partial, fd

    monkeypatch.setattr(repro.files, "new_partial", filling)
    argv = train_args(token_dir, tiny_indices, out)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"repro: error: {out / 'ckpt.pt'}: cannot be written (No space"), err
    assert (out / "ckpt.pt").read_bytes() == kept["bytes"]
    assert checkpoint_module.load_checkpoint(out / "ckpt.pt")["step"] == 5
    assert not list(out.glob("*.partial"))

    monkeypatch.undo()  # room again
    assert main(argv) == 0
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))
    assert not checkpoint_differences(out / "ckpt.pt", tiny_baseline_run / "ckpt.pt")


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


# ---- relations between values; the default loss ceiling ----------------------------------------


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
        load_preset(edited_tiny_preset(tmp_path, **{section: values}))


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


# ---- Table 1 never mislabels -----------------------------------------------------------------


def test_table1_shows_the_recorded_configuration_and_flags_an_edited_one(tiny_runs, tmp_path):
    config = shutil.copytree(REPO / "config", tmp_path / "config")
    data = yaml.safe_load((config / "experiments.yaml").read_text())
    data["experiments"]["resgelu-lr3e-3"]["lr_max"] = 0.005  # edited after the run finished
    (config / "experiments.yaml").write_text(yaml.safe_dump(data))
    table = results.table1(tiny_runs, "tiny", config_dir=config).set_index("experiment")
    assert table.at["resgelu-lr3e-3", "lr_max"] == 0.003  # what the run was trained with
    assert table.at["resgelu-lr3e-3", "config_differences"] == "optimizer.lr_max: 0.003 -> 0.005"
    assert (table.drop(index="resgelu-lr3e-3")["config_differences"] == "").all()


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
