"""What the package writes never goes through a symbolic link to its target (run folders, lock
files, train logs, tables and figures, partial files), never replaces a file named as a folder,
and a disk that refuses a write is one line naming the file: training goes on or resumes, and no
line already printed is lost."""

import errno
import json
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
from conftest import PRECIOUS, one_line_error, precious, shortened, train_args

from repro.analysis import report
from repro.cli.assembly import main
from repro.config import load_run
from repro.data.tokens import read_manifest
from repro.errors import ReproError
from repro.files import WriteError, atomic_write, write_csv, write_json
from repro.rundir import Progress
from repro.runtime.lock import LockError, hold
from repro.training.run import train


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    target = precious(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    with pytest.raises(LockError, match=r"run/\.lock: a symbolic link"):
        with hold(run, "run"):
            pass
    assert target.read_text() == PRECIOUS


def test_train_refuses_a_linked_lock_file_in_one_line(token_dir, tiny_indices, tmp_path, capsys):
    target = precious(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".lock").symlink_to(target)
    one_line_error(capsys, train_args(token_dir, tiny_indices, run), r"\.lock: a symbolic link")
    assert target.read_text() == PRECIOUS


def test_a_train_log_that_is_a_link_is_refused_and_its_target_kept(tmp_path, capsys):
    target = precious(tmp_path)
    (tmp_path / "train.log").symlink_to(target)
    with pytest.raises(ReproError, match=r"train\.log: a symbolic link"):
        Progress(tmp_path, 0, 9)
    assert target.read_text() == PRECIOUS


@pytest.mark.parametrize("linked", ["target", "partial"])
def test_written_files_replace_links_never_their_targets(tmp_path, linked):
    """run.json, metrics.csv, ckpt.pt and published files are all written by atomic_write."""
    target = precious(tmp_path)
    path = tmp_path / "run.json"
    link = path if linked == "target" else tmp_path / "run.json.partial"
    link.symlink_to(target)
    write_json(path, {"status": "completed"})
    assert target.read_text() == PRECIOUS
    assert not path.is_symlink() and json.loads(path.read_text()) == {"status": "completed"}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        {"run.json", link.name, "precious.txt"}
    )


def write_figure(path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    report.save_figure(fig, path)
    plt.close(fig)


TABLE = pd.DataFrame({"experiment": ["baseline", "resgelu"], "val_loss": [3.5, 3.4]})
WRITERS = {  # what the notebooks write: tables as CSV and HTML, figures as PNG, PDF and HTML
    "table1.csv": lambda path: write_csv(TABLE, path),
    "table1.html": lambda path: report.write_table_html(TABLE, path),
    "figure1.png": write_figure,
    "figure1.pdf": write_figure,
    "figure1.html": write_figure,
}


@pytest.mark.parametrize("name", WRITERS)
def test_tables_and_figures_replace_links_never_their_targets(tmp_path, name):
    target = precious(tmp_path)
    path = tmp_path / name
    path.symlink_to(target)
    WRITERS[name](path)
    assert target.read_text() == PRECIOUS and not path.is_symlink() and path.stat().st_size


def test_a_failed_write_leaves_a_linked_target_intact(tmp_path):
    target = precious(tmp_path)
    (tmp_path / "ckpt.pt.partial").symlink_to(target)
    with pytest.raises(RuntimeError):
        with atomic_write(tmp_path / "ckpt.pt", "wb") as f:
            f.write(b"half")
            raise RuntimeError("disk full")
    assert target.read_text() == PRECIOUS and not (tmp_path / "ckpt.pt").exists()


def test_a_write_the_disk_refuses_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "table.csv").write_text("earlier\n")
    with pytest.raises(
        WriteError, match=r"table\.csv: cannot be written \(No space left on device\)"
    ):
        with atomic_write(tmp_path / "table.csv") as f:
            f.write("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert (tmp_path / "table.csv").read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_full_disk_under_train_log_loses_no_line_printed_and_training_goes_on(tmp_path, capsys):
    progress = Progress(tmp_path, 0, 9)
    progress.path = Path("/dev/full")  # every write: ENOSPC
    rows = [{"step": s, "train_loss": 4.0, "tokens_per_s": 100.0} for s in range(3)]
    progress.report(rows)
    progress.report(rows)
    out, err = capsys.readouterr()
    assert out.count("step 2/9") == 2  # the lines are printed all the same
    assert err.count("warning: /dev/full: cannot append (No space left on device)") == 1


def test_a_run_whose_train_log_cannot_be_appended_completes(
    token_dir, tiny_indices, tmp_path, capsys
):
    (tmp_path / "run" / "train.log").mkdir(parents=True)  # every append fails (EISDIR)
    run = shortened(load_run("tiny", "baseline"), 4)  # evaluated at 0 and 4, then checkpointed
    record = train(run, token_dir, tiny_indices, tmp_path / "run")
    assert record.status == "completed" and record.last_step == 4
    assert len((tmp_path / "run" / "metrics.csv").read_text().splitlines()) == 1 + 5
    assert capsys.readouterr().err.count("train.log: cannot append (Is a directory)") == 1


@pytest.mark.parametrize("log", ["metrics.csv", "events.out.tfevents.repro"])
def test_a_disk_that_fills_during_training_is_one_line_and_the_run_resumes(
    log, token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capsys
):
    """The disk fills at step 7 (the run's log file becomes /dev/full: every write is the kernel's
    ENOSPC): one line naming the file; the checkpoint of step 5 is kept, and the same command,
    once there is room, resumes to the rows of a run never stopped."""
    from conftest import read_metrics, without_timing

    import repro.rundir.metrics
    import repro.rundir.tensorboard

    opened = {}
    for module in (repro.rundir.metrics, repro.rundir.tensorboard):

        def recording(path, flags, what, opener=module.open_no_link):
            opened[Path(path).name] = fd = opener(path, flags, what)
            return fd

        monkeypatch.setattr(module, "open_no_link", recording)
    append = repro.rundir.MetricsLog.append

    def filling(self, row):
        if row["step"] == 7:
            os.dup2(os.open("/dev/full", os.O_WRONLY), opened[log])
        append(self, row)

    monkeypatch.setattr(repro.rundir.MetricsLog, "append", filling)
    out = tmp_path / "run"
    argv = train_args(token_dir, tiny_indices, out)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"repro: error: {out / log}: cannot be written (No space left on device)")
    assert "resume" in err
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 5

    monkeypatch.setattr(repro.rundir.MetricsLog, "append", append)
    assert main(argv) == 0
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))


def test_out_naming_a_file_is_one_line_and_leaves_the_file(
    token_dir, tiny_indices, tmp_path, capsys
):
    target = precious(tmp_path)
    one_line_error(
        capsys, train_args(token_dir, tiny_indices, target), r"precious\.txt: exists and is not a"
    )
    argv = ["indices", "--preset", "tiny", "--data", str(token_dir), "--out", str(target / "ix")]
    one_line_error(capsys, argv, r"precious\.txt/ix: cannot be created \(Not a directory\)")
    assert target.read_text() == PRECIOUS


def test_prepare_never_writes_through_a_linked_partial_file(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"document {i}"}) + "\n" for i in range(40)))
    out = tmp_path / "tokens"
    out.mkdir()
    target = precious(tmp_path)
    (out / "train.bin.partial").symlink_to(target)
    argv = ["prepare", "--data-files", str(corpus), "--out", str(out), "--expected-docs", "40"]
    assert main(argv + ["--num-proc", "1", "--cache-dir", str(tmp_path / "cache")]) == 0
    assert target.read_text() == PRECIOUS
    assert read_manifest(out)["splits"]["train"]["documents"] + 1 == 40


def _fifo(path):
    os.mkfifo(path)


def _socket(path):
    import socket

    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()  # the socket file stays


def _link_to_dev_null(path):
    path.symlink_to("/dev/null")


@pytest.mark.parametrize(
    "make, kind",
    [
        (_fifo, "a named pipe"),
        (_socket, "a socket"),
        (_link_to_dev_null, "a character device \\(through a symbolic link\\)"),
    ],
)
def test_a_destination_that_is_no_file_is_refused_in_one_line(tmp_path, capsys, make, kind):
    """Run as root, a rename over `--out` would replace a device (/dev/null) with a file."""
    import stat

    out = tmp_path / "claims.csv"
    make(out)
    before = os.lstat(out)
    line = one_line_error(
        capsys, ["claims", "--preset", "tiny", "--runs", tmp_path / "none", "--out", out],
        f"{out}: {kind}, not a file: nothing written there",
    )  # fmt: skip
    assert str(out) in line
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["claims.csv"]  # no partial file left
