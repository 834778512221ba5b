"""Every file the package reads is a regular file of bounded size, checked before it is read: a
named pipe would block the reader forever, a device (/dev/zero) never end, a huge file fill the
memory. Each is one line naming the file (repro.files.open_regular, read_regular)."""

import os

import pytest

from repro import files
from repro.analysis.runs import read_run
from repro.analysis.status import status_table
from repro.errors import ReproError
from repro.files import read_json, read_regular
from repro.rundir import RunError, rows_before


@pytest.fixture
def run_dir(tmp_path, write_run):
    return write_run(tmp_path / "runs" / "tiny" / "baseline", "baseline", {0: 6.0}, last_step=3)


def test_a_named_pipe_as_metrics_is_refused_not_waited_on(run_dir):
    (run_dir / "metrics.csv").unlink()
    os.mkfifo(run_dir / "metrics.csv")
    with pytest.raises(RunError, match=r"metrics\.csv: not a regular file \(a metrics file"):
        read_run(run_dir)
    with pytest.raises(RunError, match=r"metrics\.csv: not a regular file"):
        rows_before(run_dir / "metrics.csv", 2)


def test_a_device_as_a_runs_record_is_a_damaged_run_in_status(run_dir):
    (run_dir / "run.json").unlink()
    (run_dir / "run.json").symlink_to("/dev/zero")
    table = status_table(run_dir.parent.parent, "tiny")
    assert table[0]["status"] == "damaged"
    assert "run.json: not a regular file (a JSON file is expected)" in table[0]["problem"]


def test_a_file_past_its_limit_is_refused_unread(run_dir, monkeypatch):
    monkeypatch.setattr(files, "JSON_BYTES", 100)
    with pytest.raises(ReproError, match=r"run\.json: [0-9,]+ bytes, more than 100: not a JSON"):
        read_json(run_dir / "run.json")
    assert read_regular(run_dir / "metrics.csv", 1 << 20).startswith(b"step,")
