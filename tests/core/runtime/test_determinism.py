"""runtime.deterministic (docs/runs.md, "Deterministic runs"): it sets torch's deterministic
switches before the model is built, changes no number on the CPU (where runs are bit for bit
already), is recorded in run.json and never in the run's identity, and is refused with the levers
that cannot be deterministic, each in one line naming the key. The trainings that turn it on run
in their own process: torch's switches are global to a process."""

import os
import subprocess
import sys

import pytest
import torch
import torch._inductor.config as inductor
from conftest import (
    REPO,
    edited_tiny_preset,
    one_line_error,
    read_metrics,
    train_args,
    without_timing,
)

from repro.config import ConfigError, load_preset, load_run
from repro.rundir import read_record
from repro.runtime import signals
from repro.runtime.determinism import CUBLAS_WORKSPACE
from repro.training.run import train, training_device

# `repro train` of this checkout, with no cuBLAS workspace set: the one the switch sets.
ENV = {k: v for k, v in os.environ.items() if k != CUBLAS_WORKSPACE} | {
    "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
}


def deterministic_preset(tmp_path, **runtime) -> str:
    runtime = {"deterministic": True} | runtime
    return edited_tiny_preset(tmp_path, "deterministic.yaml", runtime=runtime)


def train_in_own_process(data, indices, out, preset) -> None:
    command = [sys.executable, "-m", "repro", *train_args(data, indices, out, preset=preset)]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


def test_a_deterministic_run_is_the_default_run_bit_for_bit_and_records_the_switch(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path
):
    """On the CPU the package's runs are bit for bit already: the switch changes no number."""
    out = tmp_path / "run"
    train_in_own_process(token_dir, tiny_indices, out, deterministic_preset(tmp_path))
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))
    record, default = read_record(out), read_record(tiny_baseline_run)
    assert record.deterministic is True and default.deterministic is False
    assert [s["deterministic"] for s in record.sessions] == [True]
    assert record.config["runtime"]["deterministic"] is True
    assert record.identity == default.identity


def test_a_run_resumed_with_the_switch_turned_on_is_the_same_run(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch
):
    """Stopped after a few steps without it, resumed with it: the run resumes (its identity is
    the same), ends as the uninterrupted run, and each session says how it ran."""
    out, asked = tmp_path / "run", []
    monkeypatch.setattr(signals, "requested", lambda: len(asked.append(1) or asked) > 5)
    with pytest.raises(signals.Preempted):
        train(load_run("tiny", "baseline"), token_dir, tiny_indices, out)
    monkeypatch.undo()
    train_in_own_process(token_dir, tiny_indices, out, deterministic_preset(tmp_path))
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))
    record = read_record(out)
    assert record.status == "completed"
    assert [(s["first_step"], s["deterministic"]) for s in record.sessions] == [
        (0, False),
        (5, True),
    ]


def switches() -> tuple:
    """What runtime.deterministic sets: torch's, cuDNN's and inductor's switches, the variable."""
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
        inductor.fallback_random,
        os.environ.get(CUBLAS_WORKSPACE),
    )


@pytest.fixture
def torch_switches_restored():
    """The test starts without the cuBLAS variable; after it, every switch is as it was."""
    algorithms, cudnn, benchmark, fallback_random, workspace = switches()
    os.environ.pop(CUBLAS_WORKSPACE, None)
    yield
    torch.use_deterministic_algorithms(algorithms)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn, benchmark
    inductor.fallback_random = fallback_random
    os.environ.pop(CUBLAS_WORKSPACE, None)
    if workspace is not None:
        os.environ[CUBLAS_WORKSPACE] = workspace


def test_the_switch_sets_torch_deterministic_where_training_sets_up(torch_switches_restored):
    run = load_run("tiny", "baseline")
    assert not run.runtime.deterministic  # off by default
    default = switches()
    training_device(run)
    assert switches() == default
    training_device(run.with_runtime(deterministic=True))
    assert switches() == (True, True, False, True, ":4096:8")


def test_a_cublas_workspace_that_is_deterministic_already_is_kept(torch_switches_restored):
    os.environ[CUBLAS_WORKSPACE] = ":16:8"  # the other value PyTorch documents as deterministic
    training_device(load_run("tiny", "baseline", deterministic=True))
    assert switches()[0] and os.environ[CUBLAS_WORKSPACE] == ":16:8"


@pytest.mark.parametrize("value", [":0:0", "", ":4096:8\n", "9" * 5000])
def test_a_cublas_workspace_set_otherwise_is_one_line_and_nothing_is_switched(
    torch_switches_restored, capsys, token_dir, tiny_indices, tmp_path, value
):
    os.environ[CUBLAS_WORKSPACE] = value
    before = switches()
    preset = deterministic_preset(tmp_path)
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", preset=preset)
    line = one_line_error(
        capsys,
        argv,
        r"runtime\.deterministic: \$CUBLAS_WORKSPACE_CONFIG is '.*', with which cuBLAS is not "
        r"deterministic: unset it, or set it to :4096:8$",
    )
    assert len(line) < 250 and switches() == before
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "key", "value"),
    [
        ("--attention", "attention", "cudnn"),
        ("--compile-mode", "compile_mode", "max-autotune-no-cudagraphs"),
    ],
)
def test_a_lever_that_cannot_be_deterministic_is_one_line_naming_the_key(
    capsys, token_dir, tiny_indices, tmp_path, option, key, value
):
    preset = deterministic_preset(tmp_path)
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", option, value, preset=preset)
    one_line_error(
        capsys,
        argv,
        rf"preset deterministic, experiment baseline: runtime\.{key}: {value} cannot be "
        rf"deterministic \(.*\), and runtime\.deterministic is true$",
    )
    assert not (tmp_path / "run").exists()
    written = deterministic_preset(tmp_path, **{key: value})  # in the preset itself
    with pytest.raises(ConfigError, match=rf"^{written}: runtime\.{key}: {value} cannot be"):
        load_preset(written)
    load_run("tiny", "baseline", **{key: value})  # without the switch: a lever like any


def test_the_levers_that_can_be_deterministic_are_not_refused(tmp_path):
    for lever in [
        {"attention": "flash"},
        {"attention": "efficient"},
        {"attention": "math"},
        {"compile": True, "compile_mode": "reduce-overhead"},
        {"fused_loss": True, "loss_chunks": 2, "fused_projection": True},
        {"train_micro_batch": "auto"},
    ]:
        assert load_preset(deterministic_preset(tmp_path, **lever)).runtime.deterministic


@pytest.mark.parametrize(("value", "shown"), [("yes", "'yes'"), (1, "1"), (None, "None")])
def test_the_switch_is_a_boolean_or_one_line_naming_it(
    capsys, token_dir, tiny_indices, tmp_path, value, shown
):
    preset = edited_tiny_preset(tmp_path, runtime={"deterministic": value})
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", preset=preset)
    one_line_error(capsys, argv, rf"runtime\.deterministic: {shown} is not of type 'boolean'$")
    assert not (tmp_path / "run").exists()
