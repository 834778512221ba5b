"""A console script of the workflow as the dag stage runs it (benchmarks/gpu/dag.py), its start and
end recorded: `repro` and `papermill`, which a GPU node has no scripts for (neither is installed
there; their code is on the PYTHONPATH), run in this process, as their scripts would.

usage: job.py TIMES NAME ARGS...

NAME is resolved as pip's script would resolve it, from the installed distributions' console
scripts (repro's own from the entry points dag.py declares where it is not installed). One JSON
line goes to the file TIMES as the job starts (its process, command and wall-clock time) and one as
it ends (its exit status and time): a job's rule execs its command, so this process is the job
Snakemake started, and its times are the job's own. Standard library only, until the script runs.
"""

import importlib.metadata
import json
import os
import sys
import time


def note(times: str, entry: dict) -> None:
    """One line appended at once: the jobs of a DAG share the file, each line whole."""
    line = (json.dumps(entry | {"pid": os.getpid()}) + "\n").encode()
    descriptor = os.open(times, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def script(name: str):
    """The callable of console script `name` (the first distribution's that declares it)."""
    found = importlib.metadata.entry_points(group="console_scripts", name=name)
    if not found:
        raise SystemExit(f"job.py: no console script {name!r} among the installed distributions")
    return next(iter(found)).load()


def main() -> int:
    times, name, *arguments = sys.argv[1:]
    sys.argv = [name, *arguments]
    note(times, {"command": [name, *arguments], "start": time.time()})
    code = 1
    try:
        result = script(name)()
        code = result if isinstance(result, int) else 0 if result is None else 1
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0 if done.code is None else 1
        if not isinstance(done.code, (int, type(None))):
            print(done.code, file=sys.stderr)
    finally:
        note(times, {"end": time.time(), "exit": code})
    return code


if __name__ == "__main__":
    sys.exit(main())
