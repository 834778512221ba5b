"""The C allocator of the commands that run the model (repro.runtime.allocator): `repro train`
starts itself again under TCMalloc where it is installed; elsewhere it runs under glibc's malloc
as it is, saying so in one line; either way an evaluation's memory stays bounded."""

import csv
import ctypes.util
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import random_token_files, train_args
from workflow_helpers import REPO

import repro.training.run
from repro.config import load_experiments, load_preset, resolve_run
from repro.data.indices import write_indices
from repro.runtime import allocator

tcmalloc = pytest.mark.skipif(
    ctypes.util.find_library(allocator.LIBRARY) is None,
    reason=f"TCMalloc is not installed ({allocator.INSTALL})",
)

# GPT-2's vocabulary at d = 32: the logits of an evaluation micro-batch of 8 x 64 tokens are
# 103 MB, as large as the weights and activations together.
PRESET = {
    "description": "allocator probe",
    "corpus": "python-docs",
    "model": {"n_layer": 1, "n_head": 2, "d_model": 32, "block_size": 64, "vocab_size": 50304},
    "train": {
        "max_step": 2,
        "batch_size": 8,
        "eval_micro_batch": 8,
        "warmup_steps": 1,
        "decay_steps": 2,
        "eval_interval": 3,  # at step 0
        "eval_sequences": 16,
        "eval_rows": 1,
    },
    "runtime": {"device": "cpu", "compile": False, "checkpoint_interval": 100},
    "report": {"table_step": 0},
    "resources": {"mem_mb": 2000, "runtime": 10},
}


def prepared(tmp_path, name: str, eval_batches: int):
    """(preset path, data dir, indices dir) of the probe with `eval_batches` per split."""
    preset = yaml.safe_load(yaml.safe_dump(PRESET))
    preset["train"]["eval_sequences"] = 8 * eval_batches
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(preset))
    data = tmp_path / "data"
    if not data.exists():
        random_token_files(data)
    write_indices(load_preset(str(path)), data, tmp_path / f"indices-{name}")
    return path, data, tmp_path / f"indices-{name}"


def repro_train(tmp_path, name: str, eval_batches: int, **env) -> tuple[str, int]:
    """`repro train` of the probe, as a user starts it: (its output, its peak resident MB)."""
    preset, data, indices = prepared(tmp_path, name, eval_batches)
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    # a user's shell: no allocator chosen yet (the tests' processes run under TCMalloc: conftest)
    environ = {k: v for k, v in os.environ.items() if k not in (allocator.ENV, "LD_PRELOAD")}
    process = subprocess.Popen(
        [sys.executable, "-m", "repro", *train_args(data, indices, tmp_path / name, preset=preset)],
        env=environ | {"PYTHONPATH": path} | env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, output
    return output, usage.ru_maxrss // 1024


def logged(run_dir) -> tuple[str, list[dict]]:
    """run.json's allocator, and metrics.csv's rows without their times."""
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = [
            {k: v for k, v in row.items() if k not in ("step_time_s", "tokens_per_s")}
            for row in csv.DictReader(f)
        ]
    return json.loads((run_dir / "run.json").read_text())["malloc"], rows


@pytest.mark.slow  # two `repro train` processes, each restarting itself
@tcmalloc
def test_repro_train_runs_under_tcmalloc_with_glibcs_numbers(tmp_path):
    output, _ = repro_train(tmp_path, "tcmalloc", eval_batches=2)
    repro_train(tmp_path, "glibc", eval_batches=2, REPRO_MALLOC="glibc")
    assert output.count("config: ") == 1, output  # started again before it printed anything
    assert "TCMalloc" not in output
    malloc, rows = logged(tmp_path / "tcmalloc")
    assert malloc == "tcmalloc"
    assert logged(tmp_path / "glibc") == ("glibc", rows)  # every loss, bit for bit
    assert len(rows) == 3


def test_without_tcmalloc_training_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(allocator, "active", lambda: False)  # the tests' TCMalloc (conftest)
    monkeypatch.setattr(allocator, "huge_pages_offered", lambda: False)
    monkeypatch.delenv(allocator.ENV, raising=False)
    allocator.restart_under_allocator()  # nothing to start: this process goes on
    preset, data, indices = prepared(tmp_path, "run", eval_batches=2)
    run = resolve_run(load_preset(str(preset)), load_experiments()["baseline"])
    record = repro.training.run.train(run, data, indices, tmp_path / "run")
    notices = [line for line in capsys.readouterr().out.splitlines() if "TCMalloc" in line]
    assert notices == [
        "repro: TCMalloc not found (apt-get install libtcmalloc-minimal4): training under "
        "glibc's malloc, whose page faults can take a third of a CPU run's time"
    ]
    assert record.malloc == "glibc" and record.status == "completed"


# The environment the restart leaves where TCMalloc is not installed (restart_environment).
HUGE_PAGES = {"GLIBC_TUNABLES": f"{allocator.TUNABLE}=1", allocator.ENV: allocator.HUGE_PAGES}


def restarted_with(monkeypatch, tcmalloc: str | None, offered: bool) -> list[dict]:
    """The environments `restart_under_allocator` would exec this process with (none or one)."""
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: tcmalloc)
    monkeypatch.setattr(allocator, "active", lambda: False)
    monkeypatch.setattr(allocator, "huge_pages_offered", lambda: offered)
    monkeypatch.delenv(allocator.ENV, raising=False)
    execs = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: execs.append(env))
    allocator.restart_under_allocator()
    return execs


def test_without_tcmalloc_the_restart_is_glibcs_with_huge_pages(monkeypatch):
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    (env,) = restarted_with(monkeypatch, None, offered=True)
    assert (env["GLIBC_TUNABLES"], env[allocator.ENV]) == (
        "glibc.malloc.hugetlb=1",
        "glibc-hugepages",
    )
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")  # a user's own: kept
    (env,) = restarted_with(monkeypatch, None, offered=True)
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")  # a user's choice: theirs
    assert restarted_with(monkeypatch, None, offered=True) == []
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert restarted_with(monkeypatch, None, offered=False) == []  # nothing to restart under
    (env,) = restarted_with(monkeypatch, "libtcmalloc_minimal.so.4", offered=True)
    assert env[allocator.ENV] == "tcmalloc" and "GLIBC_TUNABLES" not in env  # TCMalloc first
    monkeypatch.setenv(allocator.ENV, "glibc")  # REPRO_MALLOC=glibc: glibc's as it is
    monkeypatch.setattr(os, "execve", lambda *a: pytest.fail("restarted under REPRO_MALLOC=glibc"))
    allocator.restart_under_allocator()


@pytest.mark.parametrize(
    "glibc, mode, offered",
    [
        ("glibc 2.36", "always [madvise] never", True),
        ("glibc 2.35", "[always] madvise never", True),
        ("glibc 2.36", "always madvise [never]", False),  # the kernel gives no huge pages
        ("glibc 2.31", "always [madvise] never", False),  # no glibc.malloc.hugetlb before 2.35
        ("glibc 2.4x", "always [madvise] never", False),
        ("musl", "always [madvise] never", False),
        ("glibc 2.36", "", False),
        ("glibc 2.36", None, False),  # no such file (no THP in this kernel)
    ],
)
def test_huge_pages_are_offered_by_glibc_2_35_and_a_kernel_with_them(
    tmp_path, monkeypatch, glibc, mode, offered
):
    thp = tmp_path / "enabled"
    if mode is not None:
        thp.write_text(mode + "\n")
    monkeypatch.setattr(allocator, "THP", str(thp))
    monkeypatch.setattr(os, "confstr", lambda name: glibc)
    assert allocator.huge_pages_offered() is offered


def test_training_under_huge_pages_says_what_it_costs(monkeypatch):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(allocator, "active", lambda: False)
    monkeypatch.setenv(allocator.ENV, allocator.HUGE_PAGES)
    assert allocator.in_use() == "glibc-hugepages"
    assert allocator.notice() == (
        "repro: TCMalloc not found (apt-get install libtcmalloc-minimal4): training under "
        "glibc's malloc with transparent huge pages, which TCMalloc outruns on the CPU"
    )


@pytest.mark.slow  # two `repro train` processes
def test_huge_pages_change_no_number(tmp_path):
    """`repro train` as the restart without TCMalloc leaves it: run.json says so, and every loss
    is glibc's as it is, bit for bit."""
    repro_train(tmp_path, "hugepages", eval_batches=2, **HUGE_PAGES)
    repro_train(tmp_path, "glibc", eval_batches=2, REPRO_MALLOC="glibc")
    malloc, rows = logged(tmp_path / "hugepages")
    assert malloc == "glibc-hugepages"
    assert logged(tmp_path / "glibc") == ("glibc", rows)


@pytest.mark.slow  # two `repro train` processes whose peaks are compared
@pytest.mark.parametrize("setting", [{}, HUGE_PAGES], ids=["as-restarted", "huge-pages"])
def test_evaluation_memory_does_not_grow_with_its_micro_batches(tmp_path, setting):
    """An evaluation of 16 micro-batches per split peaks where one of 2 does: each micro-batch's
    freed logits are reused by the next, not left behind in a fragmented heap (as glibc's malloc
    told to keep its freed memory does: docs/performance.md)."""
    _, few = repro_train(tmp_path, "few", eval_batches=2, **setting)
    _, many = repro_train(tmp_path, "many", eval_batches=16, **setting)
    assert many <= few + 100, (few, many)  # MB


def test_ld_preload_naming_a_missing_tcmalloc_is_no_traceback(tmp_path):
    """LD_PRELOAD naming a TCMalloc that is not there: ld.so ignores it, and so does looking for
    TCMalloc (find_library reads ld.so's error lines in ldconfig's output as a file name). Both
    commands as `python -m repro` runs them, in one process: one start of Python."""
    commands = [
        train_args(tmp_path / "data", tmp_path / "indices", tmp_path / "run"),
        ["evaluate", "--checkpoint", tmp_path / "ckpt.pt", "--preset", "tiny",
         "--data", tmp_path / "data", "--indices", tmp_path / "indices"],
    ]  # fmt: skip
    code = (  # `python -m repro ARGV` for each, its exit status printed
        "import runpy, sys\n"
        f"for argv in {[list(map(str, c)) for c in commands]!r}:\n"
        "    sys.argv = ['repro', *argv]\n"
        "    try:\n"
        "        runpy.run_module('repro', run_name='__main__')\n"
        "    except SystemExit as done:\n"
        "        print('exit', done.code)"
    )
    env = os.environ | {"LD_PRELOAD": str(tmp_path / "libtcmalloc_minimal.so.4")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env.pop(allocator.ENV, None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and "exit 2\nexit 2\n" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("repro: error: ")]
    assert len(errors) == 2, done.stderr


def test_a_missing_library_in_ld_preload_neither_breaks_nor_follows_the_restart(monkeypatch):
    """Where ldconfig does not list TCMalloc, find_library reads gcc's output, whose ld.so error
    lines about the missing LD_PRELOAD it opens as files (an OSError): TCMalloc counts as not
    installed. Where it is installed, the restart preloads it without the missing file, which
    would make ld.so print an error line in every process started."""
    monkeypatch.setenv("LD_PRELOAD", "/nowhere/libtcmalloc_minimal.so.4")
    monkeypatch.delenv(allocator.ENV, raising=False)
    monkeypatch.setattr(allocator, "active", lambda: False)

    def unreadable(name):
        raise FileNotFoundError(2, "No such file or directory", "ERROR: ld.so: object")

    monkeypatch.setattr(ctypes.util, "find_library", unreadable)
    monkeypatch.setattr(allocator, "huge_pages_offered", lambda: False)
    assert allocator.notice().startswith("repro: TCMalloc not found")
    allocator.restart_under_allocator()  # nothing to restart under
    preloads = []
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libtcmalloc_minimal.so.4")
    monkeypatch.setattr(os, "execve", lambda path, argv, env: preloads.append(env["LD_PRELOAD"]))
    allocator.restart_under_allocator()
    assert preloads == ["libtcmalloc_minimal.so.4"]
