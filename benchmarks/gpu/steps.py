"""The step runner of the GPU validation's stages (benchmarks/gpu/stages.py, docs/gpu.md).

A stage is a list of steps, each a child process with a deadline. Nothing is lost when a window
ends: the stage's JSON is rewritten (atomically) whenever a step starts or ends, and every line a
step prints is appended to the stage's log at once, so killing the whole stage at any moment keeps
every finished step's outcome, and the step it was in shows as `running`.

A step runs in a process group of its own: at its deadline the whole group (the step and whatever
it started) is killed and the step recorded as `timed out`. Its output is read by a thread, so the
deadline never waits on a pipe. A step also dies with the stage (Linux's parent-death signal), so
none keeps a GPU busy after the stage is gone. This module imports neither torch nor the package.

`python steps.py LOG...` prints the lines of logs that read as a warning or error (ALARMING).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the stage process dies (Linux; elsewhere a no-op)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


class Stage:
    """One stage's deadline, log (`<name>.log`) and record (`<name>.json`) in folder `out`.

    skip: steps not to run (recorded as skipped; an earlier run's outcome in the JSON is kept).
    """

    def __init__(self, name: str, out: Path, budget: float, skip=(), record: dict | None = None):
        self.name, self.out, self.skip = name, Path(out), set(skip)
        self.deadline = time.monotonic() + budget
        self.began = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True)
        self.path = self.out / f"{name}.json"
        self.earlier = json.loads(self.path.read_text())["steps"] if self.path.exists() else {}
        self.log = open(self.out / f"{name}.log", "a")
        self.record = {"stage": name, **(record or {}), "steps": {}}
        self.say(f"=== stage {name}, {time.ctime()}")
        self.save()

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        """Rewrite the JSON: under a temporary name, then renamed, so it is never half-written."""
        self.record["seconds"] = round(time.monotonic() - self.began, 1)
        partial = self.path.with_name(self.path.name + ".partial")
        partial.unlink(missing_ok=True)  # a stale one, or a link: never written through
        partial.write_text(json.dumps(self.record, indent=2) + "\n")
        os.replace(partial, self.path)

    def note(self, key: str, outcome: dict) -> dict:
        """Record a step's outcome (status ok, failed, skipped or timed out) and save at once."""
        self.record["steps"][key] = outcome
        self.save()
        return outcome

    def skipped(self, key: str, minimum: float) -> bool:
        """Whether step `key` is not to run: named by --skip (its earlier outcome kept), or less
        than `minimum` seconds of the stage's budget left."""
        if key in self.skip:
            self.say(f"{key}: skipped (--skip)")
            self.note(key, self.earlier.get(key, {"status": "skipped", "reason": "--skip"}))
            return True
        if self.left() < minimum:
            self.say(f"{key}: skipped (the stage's time budget is spent)")
            self.note(key, {"status": "skipped", "reason": "stage time budget spent"})
            return True
        return False

    def run(
        self,
        key: str,
        command: list[str],
        expect: int = 0,
        minimum: float = 30,
        limit: float | None = None,
    ) -> dict:
        """Run `command` as step `key` until it exits or its deadline (`limit` seconds, at most
        the stage's remainder) passes; its output into the log. `expect`: the exit status that is
        success. Returns the recorded outcome (status, exit, seconds)."""
        if self.skipped(key, minimum):
            return self.record["steps"][key]
        seconds = min(limit or self.left(), self.left())
        self.say(f"$ {' '.join(command)}    (deadline {seconds:.0f} s)")
        began = time.monotonic()
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: killed whole at the deadline
            preexec_fn=die_with_parent,
        )
        self.note(key, {"status": "running", "pid": process.pid, "deadline_s": round(seconds)})
        reader = threading.Thread(target=self._relay, args=(process.stdout,), daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=seconds)
            status = "ok" if code == expect else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code, status = None, "timed out"
        # The pipe closes when the group is gone; a process that left the group may hold it.
        reader.join(timeout=5)
        outcome = {"status": status, "exit": code, "seconds": round(time.monotonic() - began, 1)}
        self.say(f"{key}: {status} ({outcome['seconds']} s)")
        return self.note(key, outcome)

    def _relay(self, stream) -> None:
        for line in stream:
            self.say(line.rstrip("\n"))

    def finish(self) -> int:
        """The last save and summary line; exit status 1 when any step failed or timed out."""
        failed = [k for k, v in self.record["steps"].items() if v["status"] not in OK]
        self.record["failed_steps"] = failed
        self.save()
        summary = f"failed: {', '.join(failed)}" if failed else "no step failed"
        self.say(f"=== stage {self.name}: {self.path}, {self.record['seconds']} s, {summary}")
        self.log.close()
        return 1 if failed else 0


OK = ("ok", "skipped")

# A line that reads as a failure: a log record of level ERROR or WARNING (Python's, kineto's, or
# torch's E/W1125-prefixed), an exception or warning class by name, pytest's count of either. CI
# requires a stage that passed to print none (benchmarks/gpu/ci.sh): a false alarm in a GPU
# window's log costs its reader the window.
ALARMING = re.compile(
    r"^(ERROR|WARNING)\b|^[EW]\d{4} |\w+(Error|Warning)\b|\b\d+ (warnings?|errors?)\b"
)


def alarming(text: str) -> list[str]:
    return [line for line in text.splitlines() if ALARMING.search(line)]


if __name__ == "__main__":  # steps.py LOG...: the alarming lines of each log; exit 1 if any
    lines = [f"{log}: {line}" for log in sys.argv[1:] for line in alarming(Path(log).read_text())]
    print("\n".join(lines), end="\n" if lines else "")
    sys.exit(1 if lines else 0)
