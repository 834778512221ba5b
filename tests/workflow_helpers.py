"""Run the repository's workflow (Snakefile, workflow/, config/, notebooks/, profiles/) in a
scratch copy, so that tests never touch the checkout's data/ and results/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hang_guard import run_watched, tail

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_PARTS = [
    "Snakefile",
    "workflow",
    "config",
    ".test",
    "notebooks",
    "profiles",
    "environment.yml",
]
# The SLURM profile on a cluster without an accounting database (no slurmdbd): ask squeue, submit
# without an account, as the README says for such clusters.
NO_ACCOUNTING = ["--slurm-status-command", "squeue", "--slurm-no-account"]
# Snakemake's log: a job starts with a block "rule NAME:" (or "localrule NAME:") whose indented
# lines give its "wildcards: ..." and "jobid: N"; it ends with "Finished jobid: N", or fails with
# a block "Error in rule NAME:" giving its jobid.
BLOCK = re.compile(r"^(?:(?:local)?rule|(Error in) rule) (\S+):\n((?:    .*\n?)+)", re.M)
FINISHED = re.compile(r"^Finished jobid: (\d+)", re.M)


def jobs(log: str) -> tuple[dict[str, str], set[str]]:
    """The jobs a Snakemake log started ({jobid: "rule (wildcards)"}) and the jobids that failed."""
    started, failed = {}, set()
    for error, rule, body in BLOCK.findall(log):
        fields = dict(re.findall(r"^    (\w+): (.*)$", body, re.M))
        jobid = fields.get("jobid", "?")
        if error:
            failed.add(jobid)
        else:
            started[jobid] = rule + (f" ({fields['wildcards']})" if "wildcards" in fields else "")
    return started, failed


def jobs_said(log: str) -> str:
    """What a Snakemake log says of its jobs: those that failed, those still running."""
    started, failed = jobs(log)
    running = set(started) - failed - set(FINISHED.findall(log))
    said = [
        f"{label}: " + ", ".join(f"rule {started.get(j, '?')} jobid {j}" for j in sorted(ids))
        for label, ids in (("failed", failed), ("still running", running))
        if ids
    ]
    return "; ".join(said) or "no job started"


def copy_workflow(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for part in WORKFLOW_PARTS:
        src = REPO / part
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / part)
    return dest


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`snakemake ARGS` in workdir with this interpreter; the library of this checkout first on
    the path (as the README's `pip install -e .` would have it). No time limit: a slow machine
    finishes it; one that stalls (hang_guard) raises Hung naming the rules then running."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return run_watched(
        [sys.executable, "-m", "snakemake", *args],
        what=f"snakemake {' '.join(args)} in {workdir}",
        describe=jobs_said,
        cwd=workdir,
        env=env,
    )


def failure(result: subprocess.CompletedProcess) -> str:
    """A failed Snakemake run in a few lines: its exit status, the jobs that failed or were
    running, and the last lines of its log (where Snakemake names the failed job's log file)."""
    log = result.stdout + result.stderr
    return f"snakemake exited {result.returncode}; {jobs_said(log)}\n{tail(log)}"


@dataclass
class SetUpFailure:
    """Why a module's shared set-up failed, and whether a test has reported it yet."""

    message: str
    reported: bool = False


def shared(set_up):
    """A module's shared set-up (a module-scoped fixture's value) for one test: its value, or,
    if it failed, a failure for the first test that asks (its message, no traceback) and a skip
    for the others, so that one failure reads as one."""
    if not isinstance(set_up, SetUpFailure):
        return set_up
    if set_up.reported:
        pytest.skip("the module's shared set-up failed: reported once, by its first test")
    set_up.reported = True
    pytest.fail(set_up.message, pytrace=False)


def assert_group_planned(tmp_path: Path, target: str, rule: str, runs: tuple[str, ...]) -> None:
    """A dry run of a group's `target` at the screen preset, two seeds, plans `rule` and trains
    each of `runs` (seed k's as seed<k>/NAME)."""
    args = ["-n", "--cores", "1", target, "--config", "preset=screen", "seeds=2"]
    result = snakemake(copy_workflow(tmp_path), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"^rule {rule}:", result.stdout, re.M), result.stdout
    for run in runs:
        assert f"results/runs/screen/{run}/metrics.csv" in result.stdout
