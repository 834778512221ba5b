"""A run's metrics.csv as the analysis reads it (repro.analysis.runs.read_run): a loss written
"nan" is a diverged loss, any other value that is not a number is refused naming its line and
column; `repro status`'s plain reader (repro.rundir.read_rows) refuses the same files alike."""

import math
import re

import pandas as pd
import pytest

from repro.analysis.runs import RunError, read_metrics, read_run
from repro.analysis.status import run_summary
from repro.rundir import METRICS_COLUMNS, METRICS_CSV, read_rows


def damaged(run_dir, row: int, column: str, value: str):
    """The run's metrics.csv with `value` in `column` of data row `row`."""
    path = run_dir / METRICS_CSV
    lines = path.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[row + 1].rstrip("\n").split(",")
    cells[header.index(column)] = value
    lines[row + 1] = ",".join(cells) + "\n"
    path.write_text("".join(lines))
    return run_dir


@pytest.fixture
def run(tmp_path, write_run):
    return write_run(tmp_path / "run", "baseline", {0: 10.0, 4: 8.0, 8: 6.0}, last_step=8)


@pytest.mark.parametrize("written", ["nan", "NaN"])
def test_a_loss_written_nan_reads_as_nan(run, written):
    metrics = read_run(damaged(run, 4, "eval_val_loss", written)).metrics
    assert math.isnan(metrics.at[4, "eval_val_loss"]) and metrics.at[8, "eval_val_loss"] == 6.0


@pytest.mark.parametrize("written", ["banana", "1.0.0", "nan5"])
def test_a_value_that_is_not_a_number_is_refused_naming_its_line_and_column(run, written):
    with pytest.raises(RunError) as refused:
        read_run(damaged(damaged(run, 6, "lr", "nan"), 3, "train_loss", written))
    assert str(refused.value) == (
        f"{run / METRICS_CSV}, line 5: train_loss {written!r} is not a number"
    )


def edited(run_dir, edit):
    """The run's metrics.csv (as the package wrote it, lines ending in \\r\\n) with its data lines
    replaced by edit(lines)."""
    path = run_dir / METRICS_CSV
    header, *lines = path.read_bytes().decode().split("\r\n")[:-1]
    path.write_bytes("\r\n".join([header, *edit(lines), ""]).encode())
    return path


def cell(row: int, column: str, value: str):
    def edit(lines):
        cells = lines[row].split(",")
        cells[METRICS_COLUMNS.index(column)] = value
        return lines[:row] + [",".join(cells)] + lines[row + 1 :]

    return edit


REFUSED = {
    "a word": cell(3, "train_loss", "banana"),
    "a word pandas reads as 1": cell(3, "lr", "True"),
    "a NUL in a number": cell(3, "lr", "1\x005"),
    "a lone carriage return": cell(3, "lr", "1\r5"),
    "a step written 2.0": cell(2, "step", "2.0"),
    "a step written 02": cell(2, "step", "02"),
    "no step": cell(5, "step", ""),
    "a line too short": lambda lines: lines[:2] + [lines[2].rpartition(",")[0]] + lines[3:],
    "a line too long": lambda lines: lines[:2] + [lines[2] + ",1"] + lines[3:],
    "the first line too long": lambda lines: [lines[0] + ",1"] + lines[1:],
    "a line too long, another too short": lambda lines: (
        [lines[0] + ",1", lines[1].rpartition(",")[0]] + lines[2:]
    ),
    "a blank line": lambda lines: lines[:4] + [""] + lines[4:],
    "a row missing": lambda lines: lines[:4] + lines[5:],
    "no row but a blank line": lambda lines: [""],
}
READ_ALIKE = {
    "as written": lambda lines: lines,
    "no rows": lambda lines: [],
    "nan spelt NaN": cell(4, "eval_val_loss", "NaN"),
    "a number written 1_0": cell(3, "tokens_seen", "1_0"),
    "a number in quotes": cell(3, "lr", '"0.5"'),
    "a number after a space": cell(3, "lr", " 0.5"),
    "infinity": cell(3, "train_loss", "-inf"),
}


@pytest.mark.parametrize("edit", REFUSED.values(), ids=REFUSED)
def test_both_readers_refuse_a_damaged_metrics_file_in_the_same_words(run, edit):
    path = edited(run, edit)
    with pytest.raises(RunError) as plain:
        read_rows(path)
    with pytest.raises(RunError) as fast:
        read_metrics(path)
    assert str(fast.value) == str(plain.value)
    assert str(plain.value).startswith(f"{path}, line ")


@pytest.mark.parametrize("edit", READ_ALIKE.values(), ids=READ_ALIKE)
def test_both_readers_read_the_same_numbers(run, edit):
    path = edited(run, edit)
    plain = pd.DataFrame(read_rows(path), columns=METRICS_COLUMNS, dtype=float)
    pd.testing.assert_frame_equal(read_metrics(path), plain.astype({"step": int}))


def test_a_run_without_metrics_is_refused_alike_by_both_readers(run):
    (run / METRICS_CSV).unlink()
    message = f"{run / METRICS_CSV}: no such file (has this run been trained?)"
    with pytest.raises(RunError, match=f"^{re.escape(message)}$"):
        read_run(run)
    with pytest.raises(RunError, match=f"^{re.escape(message)}$"):
        run_summary(run)
