"""Is a run on course: `repro compare` and the `vs authors` column of `repro status`, against runs
of ours and the authors' runs in their format (tests/helpers/authors_helpers.py), at the tiny
preset."""

import errno
import math
import os
import re
import shutil

import pandas as pd
import pytest
from authors_helpers import authors_folder
from conftest import one_line_error

from repro.analysis import compare
from repro.analysis.runs import read_run
from repro.analysis.status import status_table
from repro.annex.authors.runs import import_authors_run
from repro.cli.assembly import main
from repro.cli.status import format_status
from repro.config import load_config, load_run, seed_dir

# The authors' fabricated baseline evaluates 10.5, 8.8333, 7.1667, 5.5 at steps 0, 4, 8, 12.
THEIRS = {0: 10.5, 4: 10.5 - 5 / 3, 8: 10.5 - 10 / 3, 12: 5.5}


@pytest.fixture
def theirs(tmp_path):
    """Their out_config_tiedw_original folder and its import as a run of ours."""
    folder = authors_folder(tmp_path / "artefacts", load_run("tiny", "baseline"), ckpt=False)
    out = tmp_path / "authors" / "runs" / "tiny" / "baseline"
    import_authors_run(folder, out, *load_config("tiny"))
    return folder, out


@pytest.fixture
def ours(write_run):
    """Write our baseline at `seed`, their losses plus `offsets` at the steps given."""

    def write(runs, offsets, seed=0, last_step=12, status="completed"):
        val = {s: THEIRS[s] + d for s, d in offsets.items()}
        folder = runs / seed_dir("", seed) / "baseline"
        return write_run(folder, "baseline", val, last_step=last_step, seed=seed, status=status)

    return write


def test_a_run_that_leaves_the_band_is_off_course_from_that_step(tmp_path, theirs, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.004, 4: -0.006, 8: 0.002, 12: 0.05})
    table, source = compare.compare_runs(read_run(run), read_run(theirs[1]))
    assert source.startswith("fixed: 0.01 nats")
    assert list(table["step"]) == [0, 4, 8, 12]
    assert list(table["verdict"]) == ["untrained", "within", "within", "behind"]
    assert table["difference"].tolist() == pytest.approx([0.004, -0.006, 0.002, 0.05], abs=1e-6)
    assert compare.verdict(table).startswith(
        "off course: behind the reference from step 12, its validation loss 0.0500 nats higher"
    )


def test_step_0_is_never_where_a_run_left_its_course(tmp_path, theirs, ours):
    # Two untrained models differ by their initialisation alone: step 0 counts neither way.
    run = ours(tmp_path / "runs" / "tiny", {0: -0.5, 4: -0.002, 8: -0.03, 12: -0.04})
    table, _ = compare.compare_runs(read_run(run), read_run(theirs[1]))
    assert list(table["verdict"]) == ["untrained", "within", "ahead", "ahead"]
    line = compare.verdict(table)
    assert line.startswith("off course: ahead of the reference from step 8, its validation loss")
    assert "0.0300 nats lower" in line and "-" not in line.split(";")[0]
    assert line.endswith("outside at 2 of 3 common evaluation steps after step 0, 4..12")


def test_the_first_hours_need_only_the_first_evaluations(tmp_path, theirs, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.001, 4: -0.003}, last_step=5, status="running")
    table, _ = compare.compare_runs(read_run(run), read_run(theirs[1]))
    assert list(table["step"]) == [0, 4]
    assert compare.verdict(table) == (
        "on course: within the tolerance at 1 common evaluation step after step 0, 4..4"
    )


def test_the_seeds_of_the_preset_set_the_tolerance(tmp_path, theirs, ours):
    runs = tmp_path / "runs" / "tiny"
    spread = [0.0, 0.02, 0.04]  # sd 0.02 at every step
    for k, d in enumerate(spread):
        ours(runs, {s: d for s in THEIRS}, seed=k)
    table, source = compare.compare_runs(read_run(runs / "seed2" / "baseline"), read_run(theirs[1]))
    assert source.startswith("measured: 95% interval of a difference from 3 seeds")
    half = 4.303 * 0.02 * math.sqrt(2)  # t(0.975, 2) x sd x sqrt(2) = 0.1217
    assert table["tolerance"].tolist() == pytest.approx([half] * 4, abs=1e-3)
    assert list(table["verdict"]) == ["untrained"] + ["within"] * 3  # 0.04: inside the seeds


def test_repro_compare_imports_their_folder_on_the_fly(tmp_path, theirs, capsys, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0, 4: 0.0, 8: -0.03, 12: -0.04})
    out = tmp_path / "compare.csv"
    assert main(["compare", str(run), "--reference", str(theirs[0]), "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tolerance: fixed: 0.01 nats" in printed
    assert "off course: ahead of the reference from step 8, its validation loss 0.0300" in printed
    assert list(pd.read_csv(out)["verdict"]) == ["untrained", "within", "ahead", "ahead"]
    assert main(["compare", str(run), "--reference", str(theirs[1]), "--tolerance", "0.05"]) == 0
    assert "on course" in capsys.readouterr().out


def test_repro_compare_of_a_missing_reference_is_one_line(tmp_path, capsys, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0})
    one_line_error(capsys, ["compare", run, "--reference", tmp_path / "nowhere"], "nowhere")


def test_no_verdict_without_a_common_evaluation_after_step_0(tmp_path, theirs, capsys, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0}, last_step=2, status="running")
    argv = ["compare", run, "--reference", theirs[1]]
    one_line_error(capsys, argv, "no verdict.*after step 0")
    assert compare.latest(compare.compare_runs(read_run(run), read_run(theirs[1]))[0]) == "-"


@pytest.mark.parametrize("tolerance", ["-1", "0", "nan", "inf"])
def test_a_tolerance_is_a_finite_positive_number(tmp_path, theirs, capsys, tolerance, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0, 4: 0.0})
    argv = ["compare", run, "--reference", theirs[1], "--tolerance", tolerance]
    one_line_error(capsys, argv, f"--tolerance.*{re.escape(tolerance)}")


def test_a_reference_of_another_configuration_is_named(tmp_path, theirs, capsys, write_run, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0, 4: 0.0, 8: 0.0, 12: 0.0})
    other = write_run(
        tmp_path / "runs" / "smoke" / "baseline", "baseline", THEIRS, last_step=12, preset="smoke"
    )
    assert main(["compare", str(run), "--reference", str(other)]) == 0
    printed = capsys.readouterr().out
    assert "configurations differ (reference -> run): " in printed
    assert "model.block_size: 64 -> 32" in printed and "train.decay_steps: 30 -> 12" in printed
    assert printed.splitlines()[-1].startswith("across configurations (they differ in ")
    assert "model.block_size" in printed.splitlines()[-1]
    assert printed.splitlines()[-1].endswith(
        "on course: within the tolerance at all 3 common evaluation steps after step 0, 4..12"
    )


def test_another_seed_is_the_same_configuration(tmp_path, capsys, ours):
    runs = tmp_path / "runs" / "tiny"
    reference = ours(runs, {s: 0.0 for s in THEIRS})
    run = ours(runs, {0: 0.0, 4: 0.0}, seed=1, last_step=5, status="running")
    assert read_run(run).record.identity != read_run(reference).record.identity  # the seed
    assert main(["compare", str(run), "--reference", str(reference)]) == 0
    printed = capsys.readouterr().out
    assert "configurations differ" not in printed
    assert printed.splitlines()[-1].startswith("on course")


def test_compare_csv_into_a_new_folder(tmp_path, theirs, capsys, ours):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0, 4: 0.0})
    out = tmp_path / "new" / "folder" / "compare.csv"
    assert main(["compare", str(run), "--reference", str(theirs[1]), "--csv", str(out)]) == 0
    assert list(pd.read_csv(out)["step"]) == [0, 4]


def test_compare_csv_that_cannot_be_written_is_one_line(
    tmp_path, theirs, capsys, monkeypatch, ours
):
    run = ours(tmp_path / "runs" / "tiny", {0: 0.0, 4: 0.0})
    (tmp_path / "a-file").write_text("")
    argv = ["compare", str(run), "--reference", str(theirs[1]), "--csv"]
    one_line_error(capsys, [*argv, tmp_path / "a-file" / "compare.csv"], "a-file")

    def disk_full(self, f, **kwargs):
        f.write("step,val_loss\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full)
    out = tmp_path / "compare.csv"
    one_line_error(capsys, [*argv, out], f"{re.escape(str(out))}.*No space left on device")
    assert list(tmp_path.glob("compare.csv*")) == []


def test_status_shows_each_run_against_the_authors(tmp_path, theirs, write_run, ours):
    runs = tmp_path / "runs"
    ours(runs / "tiny", {0: 0.0, 4: 0.0, 8: 0.0, 12: 0.05})
    write_run(runs / "tiny" / "mlp4.75", "mlp4.75", {0: 10.0}, last_step=2)
    table = status_table(runs, "tiny", tmp_path / "authors" / "runs")
    shown = format_status(table)
    assert "vs authors" in shown
    by = {r["experiment"]: r["vs_authors"] for r in table}
    assert by["baseline"] == "+0.0500 behind @12" and by["mlp4.75"] is None


def test_figure1_marks_where_ours_leaves_the_authors_band(tiny_runs, tmp_path, write_run):
    from repro.analysis import plots

    theirs = tmp_path / "authors" / "tiny"
    shutil.copytree(tiny_runs, theirs)  # theirs as ours, but their baseline ends 0.05 higher
    write_run(theirs / "baseline", "baseline", {0: 10.0, 4: 8.0, 8: 6.0, 12: 5.05}, last_step=12)
    top = plots.figure1(tiny_runs, "tiny", authors_runs_dir=theirs).axes[0]
    crosses = [line for line in top.lines if line.get_marker() == "x" and len(line.get_xdata())]
    assert [(list(c.get_xdata()), list(c.get_ydata())) for c in crosses] == [([12], [5.0])]
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    assert "outside the authors' band" in labels
