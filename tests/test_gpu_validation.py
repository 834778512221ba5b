"""The GPU validation (docs/gpu.md): on a node's Python that lacks a module the training path
imports, validate.sh brings it from the wheelhouse without pip; a compile toolchain that fails
leaves the stage uncompiled; the window stage's figures; the step runner (benchmarks/gpu/steps.py):
a step past its deadline is killed with everything it started, and a stage killed at any moment
keeps every finished step's outcome in its JSON."""

import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

import packages  # noqa: E402 (the benchmark's folder is no package)
from steps import Stage, alarming  # noqa: E402

VALIDATE = REPO / "benchmarks" / "gpu" / "validate.sh"
WINDOW_STEPS = ["indices", "train", "pair", "stopped", "resumed", "resume", "probe"]


def environment_without(tmp_path: Path, distribution: str) -> Path:
    """The python of a virtual environment holding this one's packages but `distribution`, as a
    GPU node's holds all but jsonschema; and a wheelhouse of that distribution's wheel."""
    env, packages = tmp_path / "node", tmp_path / "node-packages"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True)
    packages.mkdir()
    dist = importlib.metadata.distribution(distribution)
    ours = Path(sysconfig.get_paths()["purelib"])
    located = {dist.locate_file(f).resolve() for f in dist.files}
    files = {f for f in located if f.is_relative_to(ours.resolve())}  # not its console script
    for entry in ours.iterdir():
        if not any(f.is_relative_to(entry.resolve()) for f in files):
            (packages / entry.name).symlink_to(entry)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    site = env / "lib" / f"python{version}" / "site-packages"
    (site / "node.pth").write_text(f"{packages}\n")
    wheels = tmp_path / "wheelhouse" / f"py{version}"
    wheels.mkdir(parents=True)
    wheel = wheels / f"{distribution}-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:  # a wheel: the installed files, zipped
        for f in sorted(files):
            archive.write(f, f.relative_to(ours.resolve()))
    return env / "bin" / "python"


def validate(tmp_path, python, *args, **env) -> subprocess.CompletedProcess:
    """validate.sh in CPU mode with the folders of tmp_path; its record, log and result."""
    env = os.environ | {"PYTHON": str(python), "REPRO_VALIDATE_SCRATCH": str(tmp_path / "s")} | env
    env.pop("PYTHONPATH", None)
    command = [VALIDATE, *args, "--device", "cpu", "--out", tmp_path / "out"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_what_the_node_lacks_comes_from_the_wheelhouse_without_pip(tmp_path):
    """A Python without jsonschema (imported only at the first configuration validated): the
    environment step imports it, unpacked from the wheelhouse, and validates a configuration."""
    python = environment_without(tmp_path, "jsonschema")
    lacking = subprocess.run([python, "-c", "import jsonschema"], capture_output=True)
    assert lacking.returncode != 0 and b"No module named 'jsonschema'" in lacking.stderr
    wheelhouse = str(tmp_path / "wheelhouse")
    done = validate(
        tmp_path, python, "window", "--skip", *WINDOW_STEPS, REPRO_WHEELHOUSE=wheelhouse
    )
    assert "jsonschema" in done.stderr.split("unpacked from")[-1], done.stderr
    assert "jsonschema (not installed)" in done.stderr
    assert alarming(done.stdout + done.stderr) == []  # a module brought is no error
    record = json.loads((tmp_path / "out" / "window.json").read_text())
    environment = record["steps"]["environment"]
    assert environment["imports"]["jsonschema"] == "ok"
    assert environment["configuration"] == "ok" and environment["status"] == "ok", environment
    assert next((tmp_path / "s").glob("site-packages-py*/jsonschema/__init__.py"))


def test_a_module_the_node_lacks_is_not_installed_and_a_broken_one_names_its_error(
    tmp_path, monkeypatch
):
    """packages.py check: what the wheelhouse supplies reads as no error; a module that is there
    but fails to import, or lacks a dependency, reads as the error it is."""
    (tmp_path / "broken_module.py").write_text("raise ImportError('libfoo.so: no such file')\n")
    (tmp_path / "lacking_dependency.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(tmp_path)
    modules = ["json", "no_such_module", "json.no_such_part", "broken_module", "lacking_dependency"]
    monkeypatch.setattr(packages, "MODULES", modules)
    assert packages.missing() == [
        "no_such_module (not installed)",
        "json.no_such_part (not installed)",
        "broken_module (ImportError: libfoo.so: no such file)",
        "lacking_dependency (ModuleNotFoundError: No module named 'no_such_dependency')",
    ]


def test_ci_finds_the_lines_that_read_as_warnings_or_errors():
    """The lines CI refuses where nothing failed (steps.alarming), and those it keeps."""
    false_alarms = [
        "ERROR:2026-11-25 21:07:00 10136:10136 DeviceProperties.cpp:48] gpuGetDeviceCount failed",
        "W1125 20:59:41.191000 6098 torch/utils/cpp_extension.py:140] No CUDA runtime is found",
        "  torch/jit/_script.py:365: DeprecationWarning: `torch.jit.script_method` is deprecated",
        "validate: this Python cannot import: jsonschema (ModuleNotFoundError: No module named)",
        "26 passed, 9 skipped, 15 warnings in 82.52s (0:01:22)",
    ]
    fine = [
        "validate: this Python cannot import: jsonschema (not installed)",
        "tests/test_gpu.py::test_a_probe_error_that_is_not_memory_is_raised PASSED [ 85%]",
        "import tensorboard.compat.proto.event_pb2: ok",
        "26 passed, 9 skipped in 168.52s (0:02:48)",
    ]
    assert alarming("\n".join(false_alarms + fine)) == false_alarms


@pytest.mark.slow
def test_a_failing_compile_toolchain_leaves_the_rest_uncompiled(tmp_path):
    """No C++ compiler for inductor: the environment step says so, and the pair is timed
    uncompiled instead of failing on its first compiled step."""
    skipped = [step for step in WINDOW_STEPS if step != "pair"]
    done = validate(tmp_path, sys.executable, "window", "--skip", *skipped, CXX="false")
    record = json.loads((tmp_path / "out" / "window.json").read_text())
    assert record["steps"]["environment"]["toolchain"]["status"] == "failed"
    assert record["compile"] == "off: the toolchain failed"
    assert "every later step runs uncompiled" in done.stdout
    pair = record["steps"]["pair"]
    assert (
        pair["status"] == "ok" and "--no-compile" in (tmp_path / "out" / "window.log").read_text()
    )
    assert all(row["compile"] is False for row in pair["fastest"])


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie not yet reaped counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s")


def test_a_step_past_its_deadline_is_killed_with_its_children_and_recorded(tmp_path):
    stage = Stage("X", tmp_path, budget=600)
    # A step that starts a child of its own, says so, then sleeps far past its 2 s deadline.
    sleeper = (
        "import subprocess, time; child = subprocess.Popen(['sleep', '60']); "
        "print('child', child.pid, flush=True); time.sleep(60)"
    )
    began = time.monotonic()
    outcome = stage.run("sleeper", [sys.executable, "-c", sleeper], limit=2)
    assert time.monotonic() - began < 15
    assert outcome["status"] == "timed out" and outcome["exit"] is None
    record = json.loads((tmp_path / "X.json").read_text())
    assert record["steps"]["sleeper"]["status"] == "timed out"  # on disk at once
    log = (tmp_path / "X.log").read_text()
    child = int(log.split("\nchild ")[1].split()[0])  # its output reached the log before the kill
    wait_for(lambda: gone(child), 10)  # the whole process group went
    assert stage.finish() == 1


def test_a_step_within_its_deadline_is_ok_or_failed_by_its_exit_status(tmp_path):
    stage = Stage("X", tmp_path, budget=600)
    assert stage.run("ok", [sys.executable, "-c", "print('hello')"])["status"] == "ok"
    assert stage.run("fails", [sys.executable, "-c", "raise SystemExit(3)"])["exit"] == 3
    assert stage.run("expected", [sys.executable, "-c", "exit(75)"], expect=75)["status"] == "ok"
    assert stage.finish() == 1
    record = json.loads((tmp_path / "X.json").read_text())
    assert record["failed_steps"] == ["fails"] and "hello" in (tmp_path / "X.log").read_text()


def test_a_second_run_keeps_the_steps_it_skips_and_starts_none_past_the_budget(tmp_path):
    first = Stage("X", tmp_path, budget=600)
    first.run("done", [sys.executable, "-c", "print('measured')"])
    first.finish()
    again = Stage("X", tmp_path, budget=10, skip=["done"])
    again.run("done", [sys.executable, "-c", "raise SystemExit(1)"])
    again.run("late", [sys.executable, "-c", "pass"], minimum=60)
    assert again.finish() == 0
    steps = json.loads((tmp_path / "X.json").read_text())["steps"]
    assert steps["done"]["status"] == "ok" and steps["done"]["exit"] == 0  # the first run's
    assert steps["late"] == {"status": "skipped", "reason": "stage time budget spent"}


@pytest.mark.slow
def test_the_window_stage_brings_back_every_figure(tmp_path):
    """The window at the tiny preset's size: every step ok, the loss falling on the skewed
    synthetic tokens, the resumed run bit for bit the whole one's, at most 8 files."""
    done = validate(tmp_path, sys.executable, "window")
    assert done.returncode == 0, done.stdout[-3000:]
    record = json.loads((tmp_path / "out" / "window.json").read_text())
    steps = record["steps"]
    assert record["failed_steps"] == [] and all(
        steps[key]["status"] == "ok" for key in WINDOW_STEPS
    )
    train = steps["train"]
    assert train["loss_fell"] and set(train["evaluations"]) == {"0", "10", "20"}
    assert train["tokens_per_s"] > 0 and train["compile_time_s"] is not None
    assert set(steps["pair"]["step_time_ratios"]) == {"resgelu-lr3e-3"}
    assert steps["stopped"]["exit"] == 75 and steps["resume"]["bit_identical"]
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and "window-train-metrics.csv" in files, files


@pytest.mark.slow
def test_killing_validate_sh_mid_stage_keeps_the_finished_steps(tmp_path):
    """The whole command killed, as a GPU window's time limit does, while its training runs."""
    out = tmp_path / "out"
    env = os.environ | {"PYTHON": sys.executable, "REPRO_VALIDATE_SCRATCH": str(tmp_path / "s")}
    command = [VALIDATE, "window", "--device", "cpu", "--out", out]
    validate = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:

        def training():
            steps = json.loads((out / "window.json").read_text())["steps"] if out.exists() else {}
            return steps.get("train", {}).get("status") == "running" and steps

        steps = wait_for(training, 300)
    finally:
        os.killpg(validate.pid, signal.SIGKILL)
        validate.wait()
    record = json.loads((out / "window.json").read_text())
    environment = record["steps"]["environment"]
    assert environment["status"] == "ok" and environment["imports"]["repro.training.run"] == "ok"
    assert record["steps"]["indices"]["status"] == "ok"
    assert record["steps"]["train"]["status"] == "running"  # where the stage was cut
    wait_for(lambda: gone(steps["train"]["pid"]), 10)  # the step died with its stage
    assert "=== stage window" in (out / "window.log").read_text()
