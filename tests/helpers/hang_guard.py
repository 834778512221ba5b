"""A guard against a hang for the tests' subprocesses, in place of a wall-clock limit.

On a busy machine a job may take many times its usual time and still be right: a fixed limit
fails it. The guard stops a process only when it has made no progress for QUIET_S seconds: no new
byte of output (its stdout, its stderr, the files named in `logs`) and under IDLE_CPU_SHARE of a
core's time in it and its descendants. What it raises,
Hung, names the job: the command, the processes still there, what `describe` says of the
output (repro's Snakemake runs: the rules started and not finished) and the output's last lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

QUIET_S = float(os.environ.get("REPRO_TEST_QUIET_S", 600))  # override to tighten or loosen
# The share of one core that still counts as idle: a scheduler polling its jobs uses less, a job
# on a machine loaded 7 times over its cores gets more.
IDLE_CPU_SHARE = 0.02
POLL_S = 1.0
TAIL_LINES = 40


class Hung(AssertionError):
    """A process made no progress for the guard's quiet window; it was killed."""


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of the process and its live descendants, the reaped children included."""
    # psutil (the test extra) is imported where a job is watched, not with this module: the GPU
    # node's package set, on which the GPU tests of these files are collected, has no psutil.
    import psutil

    total = 0.0
    try:
        root = psutil.Process(pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.NoSuchProcess:
                pass
    except psutil.NoSuchProcess:
        pass
    return total


def tree_commands(pid: int) -> list[str]:
    """The command lines of the process's descendants still running, deepest last."""
    import psutil  # as in tree_cpu_s

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    commands = []
    for p in children:
        try:
            commands.append(f"PID {p.pid}: {' '.join(p.cmdline())[:300]}")
        except psutil.NoSuchProcess:
            pass
    return commands


def tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _sizes(paths) -> tuple:
    return tuple(os.stat(p).st_size if os.path.exists(p) else -1 for p in paths)


def watch(
    proc: subprocess.Popen,
    what: str,
    outputs: list = (),
    quiet_s: float | None = None,
    describe: Callable[[], str] = lambda: "",
    until: Callable[[], bool] = lambda: False,
) -> int | None:
    """Wait for proc to exit (its return code) or for until() to hold (None). If neither the
    files in `outputs` grow nor its process tree uses IDLE_CPU_SHARE of a core for quiet_s
    seconds, kill its process group (it was started with start_new_session) or it, and raise Hung
    naming `what` and its processes."""
    quiet_s = QUIET_S if quiet_s is None else quiet_s
    poll_s = min(POLL_S, quiet_s / 4)  # a short window looked at as often: a stall seen in time
    since, sizes, cpu = time.monotonic(), _sizes(outputs), tree_cpu_s(proc.pid)
    while proc.poll() is None:
        if until():
            return None
        time.sleep(poll_s)
        now_sizes, now_cpu = _sizes(outputs), tree_cpu_s(proc.pid)
        if now_sizes != sizes or abs(now_cpu - cpu) >= IDLE_CPU_SHARE * quiet_s:
            since, sizes, cpu = time.monotonic(), now_sizes, now_cpu
        elif time.monotonic() - since > quiet_s:
            running = tree_commands(proc.pid)
            _kill(proc)
            raise Hung(
                f"{what}: no output and no CPU time for {quiet_s:.0f} s, killed. "
                + (describe() or "")
                + "\nits processes:\n  "
                + ("\n  ".join(running) or "(none but itself)")
            )
    return proc.returncode


def _kill(proc: subprocess.Popen) -> None:
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def run_watched(
    args: list[str],
    what: str | None = None,
    quiet_s: float | None = None,
    logs: list = (),
    describe: Callable[[str], str] = lambda output: "",
    check: bool = False,
    **popen,
) -> subprocess.CompletedProcess:
    """subprocess.run(args, capture_output=True, text=True, **popen) under the guard: Hung if it
    stalls, its message ending in the output's last lines (what `describe(output)` makes of it
    first). check: CalledProcessError on a non-zero exit."""
    what = what or " ".join(map(str, args))[:200]
    with tempfile.TemporaryDirectory() as folder:
        out_path, err_path = Path(folder) / "stdout", Path(folder) / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(args, stdout=out, stderr=err, start_new_session=True, **popen)

            def output() -> str:
                return out_path.read_text(errors="replace") + err_path.read_text(errors="replace")

            def said() -> str:
                text = output()
                return f"{describe(text)}\nits last output:\n{tail(text)}"

            try:
                watch(proc, what, [out_path, err_path, *logs], quiet_s, said)
            finally:
                if proc.poll() is None:  # the test was interrupted: leave nothing running
                    _kill(proc)
        result = subprocess.CompletedProcess(
            args,
            proc.returncode,
            out_path.read_text(errors="replace"),
            err_path.read_text(errors="replace"),
        )
    if check:
        result.check_returncode()
    return result
