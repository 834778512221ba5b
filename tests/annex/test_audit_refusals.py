"""The audit's logs that the import refuses in one line, writing nothing: malformed rows,
files that are not regular (a FIFO, a device), a log too long to be the audit's, a training run's
folder as the destination; a re-import on a full disk keeps the earlier import."""

import os
import shutil
import subprocess
import sys

import pytest
from audit_helpers import curve, write_log

from repro.annex.authors import audit as audit_module
from repro.annex.authors.audit import AuditError
from repro.annex.authors.audit_log import read_audit_log
from repro.cli.assembly import main
from repro.files import WriteError, file_sha256


@pytest.mark.parametrize(
    "content,message",
    [
        ("step,loss\n0,11.1\n", r"line 1: 'step,loss', not the audit's header"),
        ("", r"line 1: 'nothing', not the audit's header"),
        ("step,train_loss,val_loss\n", r"no evaluation rows"),
        ("step,train_loss,val_loss\n0,11.1018,11.1027\n1000,3.9467\n", r"line 3: 2 fields, not 3"),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,abc\n",
            r"line 3, column val_loss: 'abc' is not a number",
        ),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1k,3.9,3.9\n",
            r"line 3, column step: '1k' is not a step",
        ),
        (
            "step,train_loss,val_loss\n1000,3.9,3.9\n0,11.1,11.1\n",
            r"line 3, column step: 0 after 1000",
        ),
        (
            "step,train_loss,val_loss\n0,nan,11.1\n1000,3.9,3.9\n",
            r"line 2, column train_loss: nan is not a loss \(only a log's last row",
        ),
        ("step,train_loss,val_loss\n0,11.1,-1.0\n", r"line 2, column val_loss: -1.0 is not a loss"),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,3.9\n²000,3.8,3.8\n",
            r"line 4, column step: '²000' is not a step",
        ),
        (
            "step,train_loss,val_loss\n0,11.1,11.1\n1000000000,3.9,3.9\n",
            r"line 3, column step: 1000000000 is past step 60002, the last this run can have",
        ),
        (
            'step,train_loss,val_loss\n0,11.1,11.1\n1000,3.9,"10.8\n1"\n',
            r"line 3, column val_loss: '\"10.8' is not a number",
        ),
    ],
)
def test_a_malformed_log_is_refused_naming_its_line_and_column(tmp_path, content, message):
    log = tmp_path / "gpt3large_x.csv"
    log.write_text(content)
    with pytest.raises(AuditError, match=message) as refused:
        read_audit_log(log, 60002)
    assert str(refused.value).startswith(str(log)) and "\n" not in str(refused.value)


def test_a_reimport_on_a_full_disk_keeps_the_earlier_import_and_can_be_retried(
    tmp_path, capsys, monkeypatch
):
    log = write_log(tmp_path / "gpt3large_x.csv", curve(12, interval=4))
    out = tmp_path / "run"
    command = ["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]
    assert main(command) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full(path, rows):
        path.write_text("step,half a file")
        raise WriteError(f"{path}: cannot be written (No space left on device)")

    with monkeypatch.context() as patch:
        patch.setattr(audit_module, "write_metrics", full)
        assert main(command) != 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main(command) == 0  # the disk freed: a retry imports again
    capsys.readouterr()


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """A FIFO given, or found in the folder, is refused. Both commands in a process of their own,
    where a wait would stay (`timeout` guards the test): one start of Python."""
    write_log(tmp_path / "logs" / "gpt3large_x.csv", curve(2000))
    fifo = tmp_path / "logs" / "gpt3large_fifo.csv"
    os.mkfifo(fifo)
    commands = [
        ["import-audit-log", str(fifo), "--out", str(tmp_path / "given")],
        ["import-audit-logs", str(tmp_path / "logs"), "--out", str(tmp_path / "found")],
    ]
    code = f"from repro.cli.assembly import main\nfor argv in {commands!r}:\n    print(main(argv))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    refused = f"repro: error: {fifo}: not a regular file (one of the audit's logs is expected)"
    said = result.stdout + result.stderr
    assert result.stdout.split() == ["2", "2"], said  # each command's exit status
    assert result.stderr.splitlines() == [refused, refused], said
    assert not (tmp_path / "given").exists() and not (tmp_path / "found").exists()


def test_a_link_to_a_device_is_refused_unread(tmp_path, capsys):
    (tmp_path / "gpt3large_zero.csv").symlink_to("/dev/zero")
    assert (
        main(
            [
                "import-audit-log",
                str(tmp_path / "gpt3large_zero.csv"),
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 2
    )
    assert "gpt3large_zero.csv: not a regular file" in capsys.readouterr().err


def test_a_log_too_long_to_be_the_audits_is_refused_unread(tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_huge.csv", curve(2000))
    with open(log, "a") as f:
        f.write("#" * (1 << 20))
    assert main(["import-audit-log", str(log), "--out", str(tmp_path / "run")]) == 2
    assert "more than 1,048,576: not one of the audit's logs" in capsys.readouterr().err


def test_an_import_never_lands_in_a_training_runs_folder(tiny_baseline_run, tmp_path, capsys):
    log = write_log(tmp_path / "gpt3large_x.csv", curve(12, interval=4))
    orphan = tmp_path / "orphan"  # a run whose run.json is gone
    shutil.copytree(tiny_baseline_run, orphan)
    (orphan / "run.json").unlink()
    live = tmp_path / "workflow-run"  # a workflow run still training in live/
    shutil.copytree(tiny_baseline_run, live / "live")
    for out in (orphan, live):
        before = {p: file_sha256(p) for p in out.rglob("*") if p.is_file()}
        assert main(["import-audit-log", str(log), "--preset", "tiny", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"{out}: holds " in err and "refusing to write there" in err
        assert {p: file_sha256(p) for p in out.rglob("*") if p.is_file()} == before
    # An earlier import is replaced.
    again = tmp_path / "imported"
    for _ in range(2):
        assert main(["import-audit-log", str(log), "--preset", "tiny", "--out", str(again)]) == 0
