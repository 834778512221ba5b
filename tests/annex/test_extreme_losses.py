"""Losses at the ends of the float range, as a run's metrics.csv can hold them: 1e20 and 1e300
are written back as they are, and an infinite loss is no reading, never a verdict or a value."""

import math

import pandas as pd
from conftest import one_line_error

from repro.annex.claims.evidence import NOT_AVAILABLE, evidence_table
from repro.cli.assembly import main
from repro.files import write_csv

STEPS = (0, 4, 8, 12)


def test_whole_numbers_beyond_an_integer_s_range_are_written_as_floats(tmp_path):
    table = pd.DataFrame({"count": [1.0, 2.0], "loss": [1e20, 1e300], "same": [3.0, 1e20]})
    frame = pd.read_csv(write_csv(table, tmp_path / "t.csv"))
    assert frame["count"].tolist() == [1, 2] and frame["count"].dtype.kind == "i"
    assert frame["loss"].tolist() == [1e20, 1e300] and frame["same"].tolist() == [3.0, 1e20]


def test_repro_compare_csv_of_huge_losses(tmp_path, write_run, capsys):
    runs = tmp_path / "runs" / "tiny"
    run = write_run(runs / "baseline", "baseline", dict.fromkeys(STEPS, 1e20), last_step=12)
    other = write_run(tmp_path / "other", "baseline", dict.fromkeys(STEPS, 1e300), last_step=12)
    out = tmp_path / "compare.csv"
    assert main(["compare", str(run), "--reference", str(other), "--csv", str(out)]) == 0
    assert pd.read_csv(out)["val_loss"].tolist() == [1e20] * 4


def test_two_runs_of_infinite_losses_get_no_verdict(tmp_path, write_run, capsys):
    runs = tmp_path / "runs" / "tiny"
    run = write_run(runs / "baseline", "baseline", dict.fromkeys(STEPS, math.inf), last_step=12)
    other = write_run(tmp_path / "other", "baseline", dict.fromkeys(STEPS, math.inf), last_step=12)
    line = one_line_error(capsys, ["compare", run, "--reference", other], "no verdict")
    assert "nan" not in line


def test_an_infinite_loss_at_the_table_step_is_no_reading(tiny_runs, write_run):
    losses = {0: 10.0, 4: 7.6, 8: 5.9, 12: math.inf}
    write_run(tiny_runs / "resgelu-lr3e-3", "resgelu-lr3e-3", losses, last_step=12)
    table = evidence_table(tiny_runs, "tiny")
    ours = table[(table["source"] == "ours") & (table["experiment"] == "resgelu-lr3e-3")]
    at_table_step = ours[ours["read_at"] == "the preset's table step"]
    assert set(at_table_step["status"]) == {NOT_AVAILABLE}
    assert all(math.isfinite(v) for v in table["value"].dropna())
