"""`repro status` over damaged and hostile run folders: one run's bad run.json or unreadable folder
is that run's line alone, names cannot drive the terminal, rows past max_step leave nothing."""

import errno
import json
import os
import pathlib
import tracemalloc

import pytest
from conftest import one_line_error

import repro.analysis.status as status
from repro.analysis.status import status_table
from repro.cli.assembly import main
from repro.cli.status import format_status
from repro.rundir import read_rows, write_metrics
from repro.rundir.metrics import TAIL_BYTES, tail_rows
from repro.runtime.lock import hold


@pytest.fixture(autouse=True)
def outside_a_workflow(tmp_path, monkeypatch):
    """`repro status` run where no workflow's config/ is: the runs there are, no planned run
    (tests/core/analysis/test_status_plan.py lists the workflow's)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def runs(tmp_path, write_run):
    """Two runs of the tiny preset (max_step 12): baseline running at step 5, mlp4.75 done."""
    root = tmp_path / "runs"
    write_run(root / "tiny" / "baseline", "baseline", {0: 6.0, 4: 5.5}, last_step=5,
              status="running", step_time_s=0.5)  # fmt: skip
    write_run(root / "tiny" / "mlp4.75", "mlp4.75", {0: 6.0, 12: 5.0}, last_step=12)
    return root


def edit_record(run_dir, edit):
    path = run_dir / "run.json"
    record = json.loads(path.read_text())
    edit(record)
    path.write_text(json.dumps(record))


def test_a_mistyped_nested_field_damages_its_run_alone(runs, capsys):
    edit_record(runs / "tiny" / "baseline", lambda r: r["identity"]["train"].update(max_step="12"))
    table = {r["folder"]: r for r in status_table(runs, "tiny")}
    baseline = table["tiny/baseline"]
    assert baseline["status"] == "damaged"
    assert "identity.train.max_step: '12' is not of type 'integer'" in baseline["problem"]
    assert table["tiny/mlp4.75"]["status"] == "completed"
    assert main(["status", "--runs-dir", str(runs)]) == 0


def test_an_unreadable_run_folder_is_its_line_alone(runs, monkeypatch, capsys):
    locked = runs / "tiny" / "baseline"

    def denied(run_dir, *args):
        if pathlib.Path(run_dir) == locked:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(run_dir, *args)

    real = status.files_dir
    monkeypatch.setattr(status, "files_dir", denied)
    monkeypatch.setattr(status, "has_run", lambda d: denied(d) and True)
    table = {r["folder"]: r for r in status_table(runs, "tiny")}
    assert table["tiny/baseline"]["status"] == "damaged"
    assert "baseline: cannot be read (Permission denied)" in table["tiny/baseline"]["problem"]
    assert table["tiny/mlp4.75"]["status"] == "completed"


def test_an_unreadable_runs_folder_is_one_line(runs, monkeypatch, capsys):
    real = pathlib.Path.iterdir

    def denied(self):
        if self == runs:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real(self)

    monkeypatch.setattr(pathlib.Path, "iterdir", denied)
    one_line_error(capsys, ["status", "--runs-dir", runs], r"runs: cannot be read \(Permission")


def test_names_cannot_drive_the_terminal(runs, capsys):
    edit_record(runs / "tiny" / "mlp4.75", lambda r: r.update(experiment="a\x1b[2J\nb"))
    printed = format_status(status_table(runs, "tiny"))
    assert "\x1b" not in printed and len(printed.splitlines()) == 3
    assert "a\\x1b[2J\\nb" in printed


def test_rows_past_max_step_leave_nothing(runs):
    edit_record(runs / "tiny" / "baseline", lambda r: r["identity"]["train"].update(max_step=2))
    table = {r["folder"]: r for r in status_table(runs, "tiny")}
    assert table["tiny/baseline"]["eta_s"] == 0


def test_a_misspelt_preset_lists_the_presets_with_runs(runs, capsys):
    argv = ["status", "--preset", "tyni", "--runs-dir", runs]
    one_line_error(capsys, argv, r"tyni: no such folder .*presets with runs in \S+: tiny")


def test_status_reads_a_long_metrics_file_at_its_tail_alone(runs, tmp_path):
    """200,000 rows (30 MB, as a long run's): status reads the last TAIL_BYTES, in bounded memory,
    and shows what the whole file's rows give."""
    live = runs / "tiny" / "baseline"
    rows = read_rows(live / "metrics.csv")
    long = [dict(rows[-1], step=step) for step in range(200_000)]
    long[-3]["eval_val_loss"] = 4.5
    write_metrics(live / "metrics.csv", long)
    tracemalloc.start()
    tracemalloc.reset_peak()  # pytest may trace already: the peak of what follows alone
    held = tracemalloc.get_traced_memory()[0]
    try:
        tail = tail_rows(live / "metrics.csv")  # what status reads of it
        peak = tracemalloc.get_traced_memory()[1] - held
    finally:
        tracemalloc.stop()
    # the window's rows as dicts, whatever the file's length (all 200,000 rows: about 800 MB)
    assert peak < 32 * TAIL_BYTES and tail[-1]["step"] == 199_999
    table = {r["folder"]: r for r in status_table(runs, "tiny")}
    assert table["tiny/baseline"]["last_step"] == 199_999
    assert table["tiny/baseline"]["last_eval_step"] == 199_997
    assert table["tiny/baseline"]["last_eval_val_loss"] == 4.5
    assert tail_rows(live / "metrics.csv", 1000)[-1]["step"] == 199_999


def test_a_run_whose_trainer_has_not_written_run_json_yet_is_listed(runs):
    """The trainer holds the folder and builds its model (minutes, on a GPU): no run.json yet."""
    starting = runs / "tiny" / "resgelu-lr3e-3" / "live"
    starting.mkdir(parents=True)
    with hold(starting, "run"):
        table = {r["folder"]: r for r in status_table(runs, "tiny")}
    assert table["tiny/resgelu-lr3e-3"]["status"] == "starting"
    assert table["tiny/resgelu-lr3e-3"]["trainer"] == f"PID {os.getpid()}"
    table = {r["folder"]: r for r in status_table(runs, "tiny")}  # its trainer gone
    assert table["tiny/resgelu-lr3e-3"]["status"] == "not started"
    assert "resgelu-lr3e-3" in format_status(list(table.values()))


def damaged_table(runs, capsys) -> dict:
    """status_table by folder, after `repro status` has printed every run and no traceback."""
    capsys.readouterr()
    assert main(["status", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "baseline" in out and "mlp4.75" in out and "Traceback" not in out
    table = {pathlib.Path(r["folder"]).name: r for r in status_table(runs, "tiny")}
    assert table["mlp4.75"]["status"] == "completed"
    return table


@pytest.mark.parametrize(
    "steps",
    [["²"], ["9" * 5000], [str(10**400 + i) for i in range(6)]],
    ids=["superscript two", "5,000 digits", "counting from 10^400"],
)
def test_a_metrics_file_of_no_possible_step_damages_its_run_alone(runs, steps, capsys):
    path = runs / "tiny" / "baseline" / "metrics.csv"
    write_metrics(path, [dict(r, step=s) for r, s in zip(read_rows(path), steps)])
    baseline = damaged_table(runs, capsys)["baseline"]
    assert baseline["status"] == "damaged"
    assert "metrics.csv: step" in baseline["problem"] and "is not a step" in baseline["problem"]


def rows_zeroed(data: bytes) -> bytes:
    """The file's size kept, its rows NUL bytes (a crash before the rows reached the disk)."""
    header = data.partition(b"\n")[0] + b"\n"
    return header + b"\0" * (len(data) - len(header))


@pytest.mark.parametrize(
    "damage, problem",
    [
        (rows_zeroed, "NUL bytes"),
        (lambda data: data + b"\0" * 4096, "NUL bytes"),
        (lambda data: data.partition(b"\n")[0] + b"\n" + b"9" * (2 << 20) + b"\n", "a line of"),
        (lambda data: data.partition(b"\n")[0] + b"\n" + b"9" * (2 << 20), "a line of"),
    ],
    ids=["rows zeroed", "NUL bytes after the rows", "a 2 MiB line", "a 2 MiB line uncut"],
)
def test_a_metrics_file_ending_in_no_row_is_damaged(runs, damage, problem, capsys):
    path = runs / "tiny" / "baseline" / "metrics.csv"
    path.write_bytes(damage(path.read_bytes()))
    baseline = damaged_table(runs, capsys)["baseline"]
    assert baseline["status"] == "damaged" and problem in baseline["problem"]
    assert "metrics.csv" in baseline["problem"]


def test_a_status_or_host_cannot_drive_the_terminal(runs, capsys):
    edit_record(runs / "tiny" / "mlp4.75", lambda r: r.update(status="\x1b[31mdone\x07"))
    live = runs / "tiny" / "baseline" / "live"
    live.mkdir()
    (live / ".lock").write_text("host evil\x1b[2J, PID 4242\n")
    capsys.readouterr()
    assert main(["status", "--runs-dir", str(runs)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed and len(printed.splitlines()) == 3
    assert "\\x1b[31mdone\\x07" in printed and "evil\\x1b[2J" in printed


@pytest.mark.parametrize("preset", ["../runs", "/", ".", "", "tiny/seed1", "a\0b", "a\\b"])
def test_a_preset_that_is_no_folder_name_is_one_line(runs, preset, capsys):
    argv = ["status", "--preset", preset, "--runs-dir", runs]
    one_line_error(capsys, argv, r"--preset '.*': not a preset's name")
