"""The GPU validation (docs/gpu.md): on a node's Python that lacks a module the training path
imports, validate.sh brings it from the wheelhouse without pip; a compile toolchain that fails
leaves the stage uncompiled; the window stage's figures; a stage killed at any moment keeps every
finished step's outcome in its JSON (the step runner itself: test_gpu_steps.py)."""

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

import packages  # noqa: E402 (the benchmark's folder is no package)
import stages  # noqa: E402
import summary  # noqa: E402
from processes import alive, wait_for  # noqa: E402
from steps import alarming  # noqa: E402

VALIDATE = REPO / "benchmarks" / "gpu" / "validate.sh"
ARMS = ["pair_baseline", "pair_resgelu-lr3e-3"]
WINDOW_STEPS = ["indices", "train", *ARMS, "pair", "stopped", "resumed", "resume", "probe"]


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


@pytest.mark.slow
def test_a_failing_compile_toolchain_leaves_the_rest_uncompiled(tmp_path):
    """No C++ compiler for inductor: the environment step says so, and the baseline is timed
    uncompiled instead of failing on its first compiled step."""
    skipped = [step for step in WINDOW_STEPS if step != "pair_baseline"]
    done = validate(tmp_path, sys.executable, "window", "--skip", *skipped, CXX="false")
    record = json.loads((tmp_path / "out" / "window.json").read_text())
    assert record["steps"]["environment"]["toolchain"]["status"] == "failed"
    assert record["compile"] == "off: the toolchain failed"
    assert "every later step runs uncompiled" in done.stdout
    arm = record["steps"]["pair_baseline"]
    assert arm["status"] == "ok" and "--no-compile" in (tmp_path / "out" / "window.log").read_text()
    assert all(row["compile"] is False for row in arm["fastest"])


@pytest.mark.slow
def test_a_training_graph_that_fails_to_compile_leaves_the_rest_uncompiled(tmp_path):
    """The toolchain compiles, the real graph does not (forced): `train` says so and runs again
    uncompiled, and so does every later step; nothing reads as failed."""
    skipped = ["pair_resgelu-lr3e-3", "stopped", "resumed", "probe"]
    done = validate(
        tmp_path, sys.executable, "window", "--skip", *skipped, REPRO_WINDOW_BREAK_COMPILE="1"
    )
    assert done.returncode == 0, done.stdout[-3000:]
    record = json.loads((tmp_path / "out" / "window.json").read_text())
    steps = record["steps"]
    assert steps["environment"]["toolchain"]["status"] == "ok"
    assert record["compile"].startswith("off: the training graph failed to compile (")
    assert "the backend refused the graph" in record["compile"]
    assert steps["train"]["status"] == "ok" and steps["train"]["compile"] is False
    assert steps["train"]["loss_fell"]
    assert all(row["compile"] is False for row in steps["pair_baseline"]["fastest"])
    assert "--no-compile" in (tmp_path / "out" / "window.log").read_text()


@pytest.mark.slow
def test_a_leg_that_did_not_finish_makes_the_resume_and_the_pair_skipped_never_failed(tmp_path):
    """The stopped leg ran, the resumed one did not (as when the budget is spent): the resume
    is not compared on half a run, and a pair with an arm missing has no ratio."""
    done = validate(tmp_path, sys.executable, "window", "--skip", *ARMS, "resumed", "probe")
    assert done.returncode == 0, done.stdout[-3000:]
    steps = json.loads((tmp_path / "out" / "window.json").read_text())["steps"]
    assert steps["stopped"]["status"] == "ok" and steps["stopped"]["exit"] == 75
    assert steps["resume"] == {
        "status": "skipped",
        "reason": "nothing to compare: resumed skipped",
    }
    assert steps["pair"]["status"] == "skipped"
    assert "resume: failed" not in (tmp_path / "out" / "window.log").read_text()


def test_the_resume_is_bit_for_bit_on_cpu_and_to_its_tolerance_on_a_gpu(
    token_dir, tiny_indices, tmp_path
):
    """runs.resume_verdict on the metrics of real runs: one whose losses differ only by
    rounding (another micro-batch: the same gradients, accumulated in another order) passes the
    GPU's tolerance but not the CPU's bit identity; one that learnt otherwise (another learning
    rate, as a restore that lost the schedule would) fails both."""
    from conftest import shortened
    from runs import RESUME_TOLERANCE, read_rows, resume_verdict

    from repro.config import load_run
    from repro.training.run import train

    run = shortened(load_run("tiny", "resgelu-lr3e-3"), 6)
    other = shortened(load_run("tiny", "resgelu-lr2.6e-3"), 6)
    for name, variant in [("whole", run), ("rounded", run.with_runtime(train_micro_batch=4))]:
        train(variant, token_dir, tiny_indices, tmp_path / name)
    train(other, token_dir, tiny_indices, tmp_path / "other")
    whole, rounded, wrong = (read_rows(tmp_path / n) for n in ("whole", "rounded", "other"))
    assert resume_verdict(whole, whole, 0.0)["status"] == "ok"
    exact, tolerant = (resume_verdict(rounded, whole, t) for t in (0.0, RESUME_TOLERANCE))
    assert not exact["bit_identical"] and exact["status"] == "failed"
    assert tolerant["status"] == "ok" and tolerant["tolerance"] == RESUME_TOLERANCE
    assert resume_verdict(wrong, whole, RESUME_TOLERANCE)["status"] == "failed"


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
    assert train["eval_compile_time_s"] is not None
    assert train["attention_kernel"] == record["attention_kernel"] == "FLASH_ATTENTION"
    assert set(steps["pair"]["step_time_ratios"]) == {"resgelu-lr3e-3"}
    assert steps["stopped"]["exit"] == 75 and steps["resume"]["bit_identical"]
    assert steps["resume"]["tolerance"] == 0
    assert 0 < steps["probe"]["fastest"][0]["loss"] < 12  # random tokens: about ln(50257)
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and "window-train-metrics.csv" in files, files
    assert record["started"].endswith("Z") and len(record["load"]) == 3
    page = summary.page(tmp_path / "out", None, None)  # the figures' page, from these files
    base = steps["pair_baseline"]["fastest"][0]
    assert f"| baseline | {base['train_micro_batch']} | {base['step_s'] * 1000:.1f} |" in page
    assert f"Measured {record['started']}" in page


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
    wait_for(lambda: not alive(steps["train"]["pid"]), 10)  # the step died with its stage
    assert "=== stage window" in (out / "window.log").read_text()


@pytest.mark.slow
def test_the_pairs_stage_times_each_comparison_in_interleaved_rounds(tmp_path):
    """validate.sh pairs: the breakdown, then each comparison, every side timed in 3 rounds, its
    median, spread and ratio over the first side's; what cannot run here is skipped."""
    done = validate(tmp_path, sys.executable, "pairs")
    assert done.returncode == 0, done.stdout[-3000:]
    steps = json.loads((tmp_path / "out" / "pairs.json").read_text())["steps"]
    assert list(steps) == ["environment", "breakdown", *stages.PAIRS]
    assert steps["compile_mode"]["status"] == "skipped"  # the tiny preset is not compiled
    for name in ("micro_batch", "fused_projection", "attention", "fused_loss"):
        sides = steps[name]["sides"]
        assert all(len(side["repetitions_s"]) == 3 and side["spread"] >= 0 for side in sides)
        assert steps[name]["over_first"][0] == 1.0
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and "pairs-fused_loss.json" in files, files


@pytest.mark.slow
def test_the_dag_stage_runs_table1_through_the_workflows_rules(tmp_path):
    """validate.sh dag in CPU mode: `snakemake main` at the tiny preset, every training job
    claiming the gpu resource, the notebooks built; each job's times and one archive back."""
    done = validate(tmp_path, sys.executable, "dag")
    assert done.returncode == 0, done.stdout[-3000:]
    record = json.loads((tmp_path / "out" / "dag.json").read_text())
    assert record["notebooks"] == "built here" and record["preset"] == "tiny"
    trained = [job for job in record["jobs"] if job["job"].startswith("train ")]
    assert len(trained) == 6 and all(job["exit"] == 0 and job["steps"] == 13 for job in trained)
    assert all(job["startup_s"] > 0 and job["steps_s"] > 0 for job in trained)
    assert "gpu=1" in (tmp_path / "out" / "dag.log").read_text()
    with tarfile.open(tmp_path / "out" / "dag-results.tar.gz") as archive:
        names = archive.getnames()
    assert "results/table1.csv" in names and "results/figures/figure1.png" in names
    assert not any(name.endswith(".pt") for name in names)  # never a checkpoint
    assert len(list((tmp_path / "out").iterdir())) <= 8


def test_the_committed_gpu_figures_are_what_their_raw_files_say():
    """Each GPU page of benchmarks/results/ is summary.py's page of the raw files it names,
    figure for figure: regenerated from them with the date and load its header states."""
    for page_file in (REPO / "benchmarks" / "results").glob("gpu-*.md"):
        text = page_file.read_text()
        header = re.search(r"Measured (\S+) \(load (.+?)\); raw files in `(.+?)/`", text)
        assert header, f"{page_file}: no header naming the date, load and raw files"
        date, load, folder = header.groups()
        assert summary.page(Path(folder), date, load) == text, page_file
