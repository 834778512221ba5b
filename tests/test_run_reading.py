"""A run's metrics.csv as the analysis reads it (repro.analysis.runs.read_run): a loss written
"nan" is a diverged loss, any other value that is not a number is refused naming its line and
column."""

import math

import pytest

from repro.analysis.runs import RunError, read_run
from repro.rundir import METRICS_CSV


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
