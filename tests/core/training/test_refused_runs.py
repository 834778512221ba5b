"""A `repro train` refused before its run is recorded (its data folder missing, its indices
another preset's) leaves nothing behind: no lock file, no folder it made, so `repro status` lists
no run that never started; a folder the user made, or that held anything, stays as it was."""

import pytest
from conftest import one_line_error, train_args

from repro.cli.assembly import main


def refused(capsys, token_dir, tiny_indices, out, why):
    data, indices = token_dir, tiny_indices
    if why == "data":
        data = out.parent / "no-such-data"
    else:
        indices = token_dir  # token files, no indices
    one_line_error(capsys, train_args(data, indices, out), r"no such|indices")


@pytest.mark.parametrize("why", ["data", "indices"])
def test_a_refused_run_leaves_no_folder_and_status_lists_none(
    token_dir, tiny_indices, tmp_path, capsys, why
):
    runs = tmp_path / "runs"
    refused(capsys, token_dir, tiny_indices, runs / "tiny" / "seed1" / "baseline", why)
    assert not runs.exists()
    (runs / "tiny").mkdir(parents=True)  # a preset folder, so that status reads it
    refused(capsys, token_dir, tiny_indices, runs / "tiny" / "baseline", why)
    assert list((runs / "tiny").iterdir()) == []
    capsys.readouterr()
    assert main(["status", "--runs-dir", str(runs), "--preset", "tiny"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    rows = [row for row in rows if row[:1] == ["tiny"]]  # preset, seed, experiment, status, ...
    assert rows and all(row[3] == "queued" for row in rows)  # planned, never a phantom run


def test_a_folder_the_user_made_stays_with_what_it_held(token_dir, tiny_indices, tmp_path, capsys):
    empty, holding = tmp_path / "empty", tmp_path / "holding"
    empty.mkdir()
    holding.mkdir()
    (holding / "notes.txt").write_text("mine\n")
    for out in (empty, holding):
        refused(capsys, token_dir, tiny_indices, out, "data")
    assert list(empty.iterdir()) == []
    assert [p.name for p in holding.iterdir()] == ["notes.txt"]
    assert (holding / "notes.txt").read_text() == "mine\n"
