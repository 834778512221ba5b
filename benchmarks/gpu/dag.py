"""The dag stage of the GPU validation (docs/gpu.md): the Table 1 workflow end to end, through its
own rules, as one command on a GPU node. Run by stages.py.

Snakemake's target `main` (Table 1, Figure 1 and the explore notebook, from every Table 1 run) at
preset gpu-short (the paper's model and batch for steps 0..10 on the python-docs corpus, which the
workflow's own prepare rule tokenizes), every training job claiming the one GPU (`--resources
gpu=1`), one inductor cache shared by every job (TORCHINDUCTOR_CACHE_DIR, validate.sh's). Where the
notebooks' packages cannot be imported here, the DAG stops after training (`--until train`) and
the notebooks are built elsewhere from the run folders that come back (`dag.py notebooks`).

The workflow runs in a copy of its files in the stage's scratch folder: the checkout's results/
and data/ are never written. Each job's `repro` or `papermill` is job.py, which records when it
started and ended; with the runs' run.json and metrics.csv that gives each training job's start-up
(process start to the run's first step), compile (the first step's time less a later one's) and
steps. What comes back: dag.json (the stage's record, the jobs' times among it), dag.log and
dag-results.tar.gz (the tables, figures, executed notebooks, logs, and each run's metrics.csv and
run.json; never a checkpoint).

  dag.py notebooks BUNDLE [--cores N]   the notebooks, here, from a bundle's run folders
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tarfile
from datetime import datetime
from pathlib import Path

import tomllib
from stages import HERE, REPO, SCRATCH, environment, open_stage

# The workflow's files, as a user's checkout holds them (tests/helpers/workflow_helpers.py's).
WORKFLOW = ["Snakefile", "workflow", "config", "notebooks", "profiles"]
PRESETS = {"cuda": "gpu-short", "cpu": "tiny"}  # the paper's model and batch; the tests' preset
# What the bundle takes of the workflow's folder: every product but checkpoints and token files.
KEPT = {".csv", ".json", ".log", ".html", ".png", ".pdf", ".ipynb", ".md"}
KEPT_BYTES = 4 << 20
NOTEBOOK_MODULES = ["papermill", "ipykernel", "jupyter_client", "nbformat"]


def copy_workflow(target: Path) -> Path:
    target.mkdir(parents=True)
    for part in WORKFLOW:
        source = REPO / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target / part)
    return target


def declare_entry_points(folder: Path) -> None:
    """Where the package is not installed (a GPU node runs it from src/): its console scripts and
    papermill engine (pyproject.toml's) as an installed distribution's metadata in `folder`, which
    goes on the jobs' PYTHONPATH: `papermill --engine repro` and job.py's `repro` find them."""
    try:
        importlib.metadata.distribution("repro")
        return
    except importlib.metadata.PackageNotFoundError:
        pass
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
    info = folder / f"repro-{project['version']}.dist-info"
    info.mkdir(parents=True)
    metadata = f"Metadata-Version: 2.1\nName: repro\nVersion: {project['version']}\n"
    (info / "METADATA").write_text(metadata)
    lines = [
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items())
        for group, entries in groups.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(lines))


def console_scripts(folder: Path, times: Path) -> Path:
    """`repro` and `papermill` in `folder` (put first on PATH), each exec'ing job.py under this
    Python: the job stays the process Snakemake started (a rule execs its command)."""
    folder.mkdir(parents=True)
    for name in ("repro", "papermill"):
        script = folder / name
        script.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "job.py"}" "{times}" {name} "$@"\n'
        )
        script.chmod(0o755)
    return folder


def notebooks_here() -> list[str]:
    """The notebooks' modules this Python cannot import (none: the notebooks are built here)."""
    return [m for m in NOTEBOOK_MODULES if importlib.util.find_spec(m) is None]


def snakemake(workflow: Path, preset: str, device: str, cores: int, *targets: str) -> list[str]:
    """The workflow's own command line: every training job claims the one `gpu` resource; the
    greedy scheduler (the ILP one needs PuLP's solver, 16 MB of wheels, for a DAG of six jobs)."""
    command = [sys.executable, "-m", "snakemake", *targets, "--directory", str(workflow)]
    command += ["--snakefile", str(workflow / "Snakefile"), "--cores", str(cores)]
    command += ["--resources", "gpu=1", "--scheduler", "greedy", "--keep-going"]
    threads = 1 if device == "cpu" else min(4, cores)
    config = [f"preset={preset}", f"device={device}", f"gpu_presets=[{preset}]"]
    return command + ["--config", *config, f"train_threads={threads}"]


def read_times(times: Path) -> list[dict]:
    """job.py's lines, one job each: its command, start, end and exit status (end and exit None
    for a job still running, or killed, when the stage ended)."""
    jobs: dict[int, dict] = {}
    lines = times.read_text().splitlines() if times.exists() else []
    for entry in map(json.loads, lines):
        job = jobs.setdefault(entry["pid"], {"end": None, "exit": None})
        job |= {k: v for k, v in entry.items() if k != "pid"}
    return sorted(jobs.values(), key=lambda job: job.get("start", 0))


def option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command[:-1] else None


def job_name(command: list[str]) -> str:
    """A job as the DAG names it: its rule, and the experiment or notebook."""
    if command[0] == "papermill":
        return f"notebook {Path(next(a for a in command if a.endswith('.ipynb'))).stem}"
    if command[1:2] == ["train"]:
        return f"train {option(command, '--experiment')}"
    return command[1] if len(command) > 1 else command[0]


def training_times(job: dict, run: Path) -> dict:
    """A training job's start-up, compile and steps, from its run's run.json and metrics.csv."""
    record, rows = run / "run.json", run / "metrics.csv"
    if not (record.exists() and rows.exists()):
        return {}
    started = datetime.fromisoformat(json.loads(record.read_text())["started"]).timestamp()
    with open(rows) as f:
        steps = [float(r["step_time_s"]) for r in csv.DictReader(f)]
    later = statistics.median(steps[1:]) if len(steps) > 1 else steps[0]
    times = {"startup_s": started - job["start"], "compile_s": steps[0] - later}
    times |= {"steps": len(steps), "steps_s": sum(steps) - times["compile_s"]}
    if job["end"] is not None:  # evaluations, checkpoints, publishing
        times["other_s"] = job["end"] - started - sum(steps)
    return {k: round(v, 2) for k, v in times.items()}


def job_times(workflow: Path, preset: str, times: Path) -> list[dict]:
    jobs = []
    for job in read_times(times):
        command = job.get("command", ["?"])
        entry = {"job": job_name(command), "exit": job["exit"]}
        if job["end"] is not None:
            entry["wall_s"] = round(job["end"] - job["start"], 2)
        if command[1:2] == ["train"]:
            run = workflow / "results" / "runs" / preset / option(command, "--experiment")
            entry |= training_times(job, run)
        jobs.append(entry)
    return jobs


def bundle(workflow: Path, target: Path) -> list[str]:
    """The DAG's products into one archive, `target` (written anew, never through a link)."""
    kept = []
    for path in sorted(workflow.rglob("*")):
        inside = path.relative_to(workflow)
        if inside.parts[0] not in ("results", "data", ".snakemake") or path.is_symlink():
            continue
        if path.is_file() and path.suffix in KEPT and path.stat().st_size <= KEPT_BYTES:
            kept.append(inside)
    target.unlink(missing_ok=True)
    with tarfile.open(target, "w:gz") as archive:
        for inside in kept:
            archive.add(workflow / inside, arcname=str(inside))
    return [str(p) for p in kept]


def stage_dag(args) -> int:
    s, scratch = open_stage("dag", args)
    environment(s, args, scratch)
    device = "cpu" if args.device == "cpu" else "cuda"
    preset = s.record["preset"] = PRESETS[device]
    workflow = copy_workflow(scratch / "workflow")
    times = scratch / "job-times.jsonl"
    declare_entry_points(scratch / "entry-points")
    bin_dir = console_scripts(scratch / "bin", times)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    os.environ["PYTHONPATH"] = (
        f"{os.environ.get('PYTHONPATH', '')}{os.pathsep}{scratch}/entry-points"
    )
    s.record["inductor_cache"] = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    lacking = notebooks_here()
    s.record["notebooks"] = "built here" if not lacking else f"not built: no {', '.join(lacking)}"
    until = ["--until", "train"] if lacking else []
    cores = os.cpu_count() or 1
    s.run("snakemake", snakemake(workflow, preset, device, cores, "main", *until), minimum=60)
    s.record["jobs"] = job_times(workflow, preset, times)
    for job in s.record["jobs"]:
        s.say(f"job {job}")
    s.record["bundled"] = len(bundle(workflow, s.out / "dag-results.tar.gz"))
    return s.finish()


def notebooks(archive: Path, cores: int) -> int:
    """The notebooks built here from a bundle's run folders: the workflow's notebook rules alone
    (`--allowed-rules`), the runs' files taken as they came back (never retrained)."""
    shutil.rmtree(SCRATCH / "dag-notebooks", ignore_errors=True)
    workflow = copy_workflow(SCRATCH / "dag-notebooks")
    with tarfile.open(archive) as bundled:
        bundled.extractall(workflow, filter="data")
    preset = next((workflow / "results" / "runs").iterdir()).name
    rules = ["--allowed-rules", "table1", "figure1", "explore"]
    command = snakemake(workflow, preset, "cpu", cores, "main") + rules
    return os.spawnv(os.P_WAIT, sys.executable, command)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the notebooks, here, from a bundle's runs")
    parser.add_argument("what", choices=["notebooks"])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--cores", type=int, default=2)
    parsed = parser.parse_args()
    sys.exit(notebooks(parsed.bundle, parsed.cores))
