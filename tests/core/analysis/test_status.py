"""`repro status` and reading a run in progress (its live/ folder)."""

import os
import re
import socket
import subprocess
import sys

import pytest
from conftest import REPO, one_line_error

from repro.analysis.runs import read_run, read_runs
from repro.analysis.status import status_table, trainer_holding
from repro.cli.assembly import main
from repro.runtime import lock as lock_module
from repro.runtime.lock import hold


@pytest.fixture(autouse=True)
def outside_a_workflow(tmp_path, monkeypatch):
    """`repro status` run where no workflow's config/ is: the runs there are, no planned run
    (tests/core/analysis/test_status_plan.py lists the workflow's)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def in_progress(write_run):
    """Write a run of the tiny preset (max_step 12) as the workflow leaves it while it trains,
    0.5 s a step: everything in live/."""

    def write(runs_dir, name, last_step=5):
        val = {0: 6.0, 4: 5.5}
        live = runs_dir / name / "live"
        return write_run(live, name, val, last_step=last_step, status="running", step_time_s=0.5)

    return write


def test_results_read_a_run_in_progress_from_its_live_folder(tmp_path, in_progress):
    in_progress(tmp_path, "baseline")
    run = read_run(tmp_path / "baseline")
    assert run.status == "running" and run.loss_at(4) == 5.5
    assert list(read_runs(tmp_path, ["baseline", "mlp4.75"])) == ["baseline"]


def test_status_lists_each_run(tmp_path, capsys, write_run, in_progress):
    runs = tmp_path / "runs"
    in_progress(runs / "tiny", "baseline")
    write_run(runs / "tiny" / "mlp4.75", "mlp4.75", {0: 6.0, 12: 5.0}, last_step=12)
    with hold(runs / "tiny" / "baseline" / "live", "run"):  # as the trainer holds its run
        table = {r["experiment"]: r for r in status_table(runs, "tiny")}
        assert main(["status", "--runs-dir", str(runs)]) == 0
    assert table["baseline"]["last_step"] == 5 and table["baseline"]["max_step"] == 12
    assert table["baseline"]["last_eval_val_loss"] == 5.5
    assert table["baseline"]["tokens_per_s"] == 128 / 0.5  # tokens a step over its time
    assert table["baseline"]["eta_s"] == 7 * 0.5  # 7 steps left at 0.5 s a step
    assert table["baseline"]["trainer"] == f"PID {os.getpid()}"
    assert table["mlp4.75"]["status"] == "completed" and table["mlp4.75"]["trainer"] is None
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "preset",
        "seed",
        "experiment",
        "status",
        "step",
        "val",
        "loss",
        "at",
        "step",
        "tokens/s",
        "ETA",
        "trainer",
        "vs",
        "authors",
        "folder",
    ]
    assert out[1].split() == [
        "tiny",
        "0",
        "baseline",
        "running",
        "5/12",
        "5.5000",
        "4",
        "256",
        "0:00:04",
        "PID",
        str(os.getpid()),
        "-",
        "tiny/baseline",
    ]


def test_status_and_help_start_without_torch_or_pandas(tmp_path, in_progress):
    # Commands that do not train start in a fraction of a second: torch and scipy.stats take
    # seconds to import, pandas half a second (benchmarks/bench_cli_start.py measures the start).
    in_progress(tmp_path / "runs" / "tiny", "baseline")
    script = (  # `repro status`, then `repro --help`, in one process: what each has imported
        "import sys\nfrom repro.cli.assembly import main\n"
        "slow = ('torch', 'scipy', 'pandas', 'numpy')\n"
        "for argv in (sys.argv[1:], ['--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"  # --help exits
        "    print('imported:', *(m for m in slow if m in sys.modules))"
    )
    env = os.environ | {"PYTHONPATH": str(REPO / "src")}
    status = ["status", "--runs-dir", str(tmp_path / "runs"), "--config-dir", str(REPO / "config")]
    result = subprocess.run(
        [sys.executable, "-c", script, *status], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "baseline" in result.stdout and "planned runs done" in result.stdout  # the plan read
    imported = [line for line in result.stdout.splitlines() if line.startswith("imported:")]
    assert imported == ["imported:", "imported:"], result.stdout


def test_a_dead_trainer_holds_nothing(tmp_path, in_progress):
    live = in_progress(tmp_path, "baseline")
    (live / ".lock").write_text(f"host {socket.gethostname()}, PID {2**22 + 1}\n")
    assert trainer_holding(tmp_path / "baseline") is None


def test_status_of_a_missing_folder_is_one_line(tmp_path, capsys):
    argv = ["status", "--preset", "smoke", "--runs-dir", tmp_path]
    one_line_error(
        capsys, argv, f"^repro: error: {re.escape(str(tmp_path / 'smoke'))}: no such folder"
    )


def test_a_stale_lock_on_this_host_holds_nothing(tmp_path, in_progress):
    """The lock names a live process (this one) that does not hold it: its trainer has ended and
    the PID is another process's now."""
    live = in_progress(tmp_path, "baseline")
    (live / ".lock").write_text(f"host {socket.gethostname()}, PID {os.getpid()}\n")
    assert trainer_holding(tmp_path / "baseline") is None


def test_a_lock_from_another_host_is_unknown_not_running(tmp_path, in_progress, write_run):
    runs = tmp_path / "runs"
    live = in_progress(runs / "tiny", "baseline")
    (live / ".lock").write_text("host elsewhere-node, PID 4242\n")
    done = write_run(runs / "tiny" / "mlp4.75", "mlp4.75", {0: 6.0, 12: 5.0}, last_step=12)
    (done / "live").mkdir()
    (done / "live" / ".lock").write_text("host elsewhere-node, PID 4243\n")
    table = {r["experiment"]: r for r in status_table(runs, "tiny")}
    assert table["baseline"]["status"] == "unknown"
    assert table["baseline"]["trainer"] == "unknown (elsewhere-node PID 4242, another host)"
    assert table["mlp4.75"]["status"] == "completed" and table["mlp4.75"]["trainer"] is None


@pytest.mark.parametrize("pid", ["²", str(2**64), "-5", "0"])
def test_a_lock_naming_no_possible_pid_names_no_trainer(tmp_path, pid, capsys, in_progress):
    live = in_progress(tmp_path / "runs" / "tiny", "baseline")
    (live / ".lock").write_text(f"host {socket.gethostname()}, PID {pid}\n")
    assert main(["status", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "baseline" in capsys.readouterr().out


def test_a_named_pipe_as_the_lock_does_not_hang_status(tmp_path, capsys, in_progress):
    live = in_progress(tmp_path / "runs" / "tiny", "baseline")
    os.mkfifo(live / ".lock")
    assert main(["status", "--runs-dir", str(tmp_path / "runs")]) == 0
    assert "baseline" in capsys.readouterr().out


def test_a_lock_of_the_same_inode_on_another_file_system_holds_nothing(
    tmp_path, in_progress, monkeypatch
):
    """/proc/locks names a lock by device and inode: a file of the same inode number locked on
    another file system is not the run's lock file."""
    live = in_progress(tmp_path, "baseline")
    lock_file = live / ".lock"
    lock_file.write_text(f"host {socket.gethostname()}, PID {os.getpid()}\n")
    info = os.stat(lock_file)
    device = (os.major(info.st_dev), os.minor(info.st_dev))
    locks = tmp_path / "locks"

    def proc_locks(major, minor):
        locks.write_text(f"1: FLOCK  ADVISORY  WRITE {os.getpid()} {major:02x}:{minor:02x}:"
                         f"{info.st_ino} 0 EOF\n")  # fmt: skip
        real = open
        monkeypatch.setattr(
            lock_module, "open", lambda p, *a: real(locks if p == "/proc/locks" else p, *a),
            raising=False,
        )  # fmt: skip

    proc_locks(device[0] + 1, device[1])  # another device, the same inode number
    assert trainer_holding(tmp_path / "baseline") is None
    proc_locks(*device)  # this very file
    assert trainer_holding(tmp_path / "baseline") == f"PID {os.getpid()}"


def test_status_finds_the_trainer_by_the_runs_folder(tmp_path, in_progress):
    """A run in a folder named otherwise than its experiment: its trainer holds that folder."""
    runs = tmp_path / "runs"
    in_progress(runs / "tiny", "baseline")
    (runs / "tiny" / "baseline").rename(runs / "tiny" / "my-baseline")
    with hold(runs / "tiny" / "my-baseline" / "live", "run"):
        table = status_table(runs, "tiny")
    assert [(r["experiment"], r["trainer"]) for r in table] == [("baseline", f"PID {os.getpid()}")]


def test_status_lists_each_seeds_runs_with_their_seed(tmp_path, capsys, write_run):
    """The workflow's layout (rules/train.smk): seed 0's runs in the preset's folder, seed k's in
    its seed<k>/."""
    runs = tmp_path / "runs"
    for seed in range(3):
        folder = runs / "tiny" / ("seed" + str(seed) if seed else "")
        write_run(folder / "baseline", "baseline", {0: 6.0, 12: 5.0}, last_step=12, seed=seed)
    table = status_table(runs)
    assert [(r["seed"], r["folder"]) for r in table] == [
        (0, "tiny/baseline"), (1, "tiny/seed1/baseline"), (2, "tiny/seed2/baseline")
    ]  # fmt: skip
    assert main(["status", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["preset", "seed", "experiment", "status"]
    assert [line.split()[:4] for line in out[1:]] == [
        ["tiny", str(seed), "baseline", "completed"] for seed in range(3)
    ]


def test_two_copies_of_an_experiment_are_told_apart_by_their_folder(tmp_path, capsys, write_run):
    runs = tmp_path / "runs"
    for folder in ("baseline", "baseline-again"):
        write_run(runs / "tiny" / folder, "baseline", {0: 6.0, 12: 5.0}, last_step=12)
    assert main(["status", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[-1] == "folder"
    assert [line.split()[-1] for line in out[1:]] == ["tiny/baseline", "tiny/baseline-again"]


def test_status_without_any_run_says_so_and_where_it_looked(tmp_path, capsys):
    nowhere = tmp_path / "runs"
    one_line_error(
        capsys, ["status", "--runs-dir", nowhere],
        f"{re.escape(str(nowhere))}: no such folder \\(no run of any preset has started here",
    )  # fmt: skip
    nowhere.mkdir()
    (nowhere / "tiny").mkdir()  # a preset's folder, no run in it
    assert main(["status", "--runs-dir", str(nowhere)]) == 0
    assert capsys.readouterr().out == f"no run of any preset in {nowhere}\n"
    assert main(["status", "--preset", "tiny", "--runs-dir", str(nowhere)]) == 0
    assert capsys.readouterr().out == f"no run of preset tiny in {nowhere / 'tiny'}\n"
