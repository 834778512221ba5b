"""What fits this machine's memory (repro.training.fit): a run is refused before allocating where
its weights and training state or one evaluation micro-batch's logits cannot fit at all."""

import os
import resource

import pytest
import torch
from conftest import one_line_error, train_args

from repro.config import load_run
from repro.runtime import device
from repro.training import evaluation, fit
from repro.training.checkpoints import save_checkpoint
from repro.training.loop import make_model, make_optimizer


def test_evaluation_logits_that_cannot_fit_are_refused_before_training(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    """Room for the weights, their gradients and AdamW's moments, not for the logits of one
    evaluation micro-batch (eval_micro_batch x block_size x vocabulary floats)."""
    run = load_run("tiny", "baseline")
    logits = 4 * run.train.eval_micro_batch * run.model.block_size * run.model.vocab_size
    state = fit.TRAINING_COPIES * fit.weight_bytes(run.model)
    monkeypatch.setattr(device, "physical_memory", lambda: state + logits - 1)
    one_line_error(
        capsys,
        train_args(token_dir, tiny_indices, tmp_path / "run"),
        r"training baseline at preset tiny needs [0-9.]+ GiB, more than the [0-9.]+ GiB of this "
        r"machine's cpu memory",
    )
    assert not (tmp_path / "run" / "metrics.csv").exists()


def test_evaluating_where_its_logits_cannot_fit_is_one_line(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    run = load_run("tiny", "baseline")
    model = make_model(run, torch.device("cpu"))
    checkpoint = tmp_path / "ckpt.pt"
    config = {"identity": run.identity(), "model": run.identity()["model"]}
    save_checkpoint(checkpoint, model, make_optimizer(model, run, False), 4, config)
    monkeypatch.setattr(
        device, "physical_memory", lambda: evaluation.evaluation_logits_bytes(run) - 1
    )
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--preset", "tiny", "--step", "4"]
    one_line_error(
        capsys,
        [*argv, "--data", str(token_dir), "--indices", str(tiny_indices), "--device", "cpu"],
        rf"evaluating {checkpoint} needs [0-9.]+ GiB, more than",
    )


def evaluate_argv(token_dir, tiny_indices, tmp_path) -> list[str]:
    run = load_run("tiny", "baseline")
    model = make_model(run, torch.device("cpu"))
    checkpoint = tmp_path / "ckpt.pt"
    config = {"identity": run.identity(), "model": run.identity()["model"]}
    save_checkpoint(checkpoint, model, make_optimizer(model, run, False), 4, config)
    argv = ["evaluate", "--checkpoint", str(checkpoint), "--preset", "tiny", "--step", "4"]
    return [*argv, "--data", str(token_dir), "--indices", str(tiny_indices), "--device", "cpu"]


def test_the_memory_check_honours_the_address_space_limit(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch
):
    """`ulimit -v` (RLIMIT_AS) well below the machine's memory: the logits that fit the machine
    but not the limit are refused in one line, not a MemoryError's traceback."""
    argv = evaluate_argv(token_dir, tiny_indices, tmp_path)
    logits = evaluation.evaluation_logits_bytes(load_run("tiny", "baseline"))
    real = resource.getrlimit

    def limited(which):  # half the logits more than the process uses when asked
        used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return (used + logits // 2,) * 2 if which == resource.RLIMIT_AS else real(which)

    monkeypatch.setattr(device.resource, "getrlimit", limited)
    one_line_error(capsys, argv, r"needs [0-9.]+ GiB, more than the [0-9.]+ GiB of this process's "
                   r"address-space limit \(ulimit -v\) less what it uses")  # fmt: skip


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_the_memory_check_honours_the_cgroups_limit(
    token_dir, tiny_indices, tmp_path, capsys, monkeypatch, version
):
    """A container's or SLURM job's cgroup (memory.max, memory.limit_in_bytes) below the
    machine's memory."""
    argv = evaluate_argv(token_dir, tiny_indices, tmp_path)
    logits = evaluation.evaluation_logits_bytes(load_run("tiny", "baseline"))
    root = tmp_path / "cgroup"
    files = {"v2": ("memory.max", "memory.current"), "v1": ("memory.limit_in_bytes",
             "memory.usage_in_bytes")}[version]  # fmt: skip
    folder = root / "memory" if version == "v1" else root
    folder.mkdir(parents=True)
    (folder / files[0]).write_text(f"{10 * logits}\n")
    (folder / files[1]).write_text(f"{9 * logits + logits // 2}\n")
    monkeypatch.setattr(device, "CGROUP_ROOT", root)
    left = device.cpu_memory()["its cgroup's memory limit less what the cgroup uses"]
    assert left == logits // 2
    one_line_error(capsys, argv, r"more than the [0-9.]+ GiB of its cgroup's memory limit")
    (folder / files[0]).write_text("max\n" if version == "v2" else f"{(1 << 63) - 4096}\n")
    assert list(device.cpu_memory()) == ["this machine's cpu memory"]  # no limit set
