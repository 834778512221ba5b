"""Run the repository's workflow (Snakefile, workflow/, config/, notebooks/, profiles/) in a
scratch copy, so that tests never touch the checkout's data/ and results/."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hang_guard import run_watched, tail

REPO = Path(__file__).resolve().parents[2]
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
    return run_watched(
        [sys.executable, "-m", "snakemake", *args],
        what=f"snakemake {' '.join(args)} in {workdir}",
        describe=jobs_said,
        cwd=workdir,
        env=snakemake_env(),
    )


def snakemake_env() -> dict:
    """This process's environment, with this checkout's library first on the path and this
    interpreter's commands (`repro`) on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    return env


CATCHABLE = sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP})


def snakemake_in_process(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`snakemake ARGS` in workdir as snakemake() runs it, its command line (snakemake.cli.main)
    run in this process: the exit status and what it prints, without the seconds a fresh
    interpreter spends importing Snakemake. For what plans or stops before any job: a dry run,
    a lint, bad input; a job that runs, or the command as a user starts it, needs snakemake().
    Each call parses the Snakefile into a fresh workflow; what the Snakefile defines lands in
    snakemake.workflow's globals and its folder in sys.path, so both are put back afterwards:
    no call sees what another parsed. Snakemake's scheduler takes SIGTERM for itself: the
    handlers are put back too, or a pool that this process later stops with SIGTERM (datasets'
    loaders) would wait forever for children that no longer die of it."""
    from snakemake import cli, workflow

    parsed_into, path, cwd = vars(workflow), list(sys.path), os.getcwd()
    handlers = {number: signal.getsignal(number) for number in CATCHABLE}
    before = dict(parsed_into)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(workdir)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main(list(args))  # always exits: 0, or 1 naming what stopped it
    except SystemExit as done:
        status = done.code
    finally:
        os.chdir(cwd)
        parsed_into.clear()
        parsed_into.update(before)
        sys.path[:] = path
        for number, handler in handlers.items():
            if handler is not None and signal.getsignal(number) is not handler:
                signal.signal(number, handler)
    return subprocess.CompletedProcess(["snakemake", *args], status, out.getvalue(), err.getvalue())


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


# The tables of the groups that `all` leaves out, planned by one dry run (conftest.group_plans).
GROUP_TABLES = ("results/ablation.csv", "results/decay_to_zero.csv", "results/v3.csv")


def assert_group_planned(plan: str, rule: str, preset: str, runs: tuple[str, ...]) -> None:
    """A dry run's plan holds the job of `rule`, which reads each of `runs` at `preset` (seed
    k's as seed<k>/NAME): the run's metrics.csv is among its inputs."""
    job = re.search(rf"^rule {rule}:\n((?:    .*\n?)+)", plan, re.M)
    assert job, plan
    inputs = re.search(r"^    input: (.*)$", job.group(1), re.M).group(1).split(", ")
    for run in runs:
        assert f"results/runs/{preset}/{run}/metrics.csv" in inputs, job.group(0)
