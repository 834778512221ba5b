import shutil

import matplotlib
import pytest

matplotlib.use("Agg")

from PIL import Image

from repro.analysis import plots, report, results
from repro.analysis.runs import read_run
from repro.config import load_run
from repro.model import parameter_counts
from repro.rundir import RunError


def test_figure1(tiny_runs, tmp_path):
    fig = plots.figure1(tiny_runs, "tiny")
    assert "preset: tiny" in fig.axes[0].get_title()
    assert fig.axes[1].get_ylabel().startswith("relative improvement")
    # Every series differs from every other in colour and in marker; the baseline is drawn on top.
    val_lines = [line for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")]
    assert len(val_lines) == 5
    assert len({line.get_color() for line in val_lines}) == 5
    assert len({line.get_marker() for line in val_lines}) == 5
    (base,) = [line for line in val_lines if line.get_label() == "baseline"]
    assert base.get_zorder() > max(line.get_zorder() for line in val_lines if line is not base)
    # a series drawn lower is wider: one that coincides with another shows around it
    by_order = sorted(val_lines, key=lambda line: -line.get_zorder())
    widths = [line.get_linewidth() for line in by_order]
    assert widths == sorted(widths) and len(set(widths)) == 5
    # the legend is outside the axes: it covers no curve
    fig.canvas.draw()
    legend = fig.axes[0].get_legend().get_window_extent()
    assert legend.x0 >= fig.axes[0].get_window_extent().x1
    png, pdf = report.save_figure(
        fig, tmp_path / "f" / "figure1.png", tmp_path / "f" / "figure1.pdf"
    )
    assert Image.open(png).size[0] > 500
    assert pdf.read_bytes().startswith(b"%PDF")


def test_figure2_with_part_of_the_sweep(tiny_runs, tmp_path, write_run):
    write_run(tiny_runs / "mlp4.5", "mlp4.5", {0: 10, 4: 7.9, 8: 5.95, 12: 4.95}, last_step=12)
    # MLP5 (99.1M) is outside the caption's 89.6M-95.6M controls: not drawn even when trained
    write_run(tiny_runs / "mlp5", "mlp5", {0: 10, 4: 7.9, 8: 5.95, 12: 4.95}, last_step=12)
    write_run(
        tiny_runs / "resgelu-wd0.05-lr3e-3",
        "resgelu-wd0.05-lr3e-3",
        {0: 10, 4: 7.6, 8: 5.88, 12: 4.93},  # as resgelu-lr3e-3: its line must not hide
        last_step=12,
    )
    fig = plots.figure2(tiny_runs, "tiny")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert any(label.startswith("mlp4.5") for label in labels)
    assert not any(label.startswith("mlp5") for label in labels)
    assert any(label.startswith("resgelu-lr3e-3") for label in labels)
    # every residual GELU configuration its own colour; a non-default weight decay on top
    nonlinear = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("resgelu")]
    assert len({line.get_color() for line in nonlinear}) == len(nonlinear) > 2
    (wd005,) = [line for line in nonlinear if line.get_label().startswith("resgelu-wd0.05")]
    assert wd005.get_zorder() > max(line.get_zorder() for line in nonlinear if line is not wd005)
    assert "preset: tiny" in fig.axes[0].get_title()
    (png,) = report.save_figure(fig, tmp_path / "figure2.png")
    Image.open(png).verify()


def test_run_curves(tiny_runs):
    fig = plots.run_curves(read_run(tiny_runs / "baseline"))
    assert "baseline" in fig.axes[0].get_title()


def test_table_frame(tiny_runs):
    frame = results.table_frame(results.table1(tiny_runs, "tiny"))
    assert frame.loc[4, "rel_improvement"].endswith("%")
    baseline = parameter_counts(load_run("tiny", "baseline").model)["non_embedding_params"]
    assert frame.loc[0, "non_embedding_params"] == f"{baseline:,}"  # exact, never "0.02M"


def test_a_missing_baseline_run_is_the_packages_error(tiny_runs):
    shutil.rmtree(tiny_runs / "baseline")
    with pytest.raises(RunError, match=r"tiny/baseline: the baseline run is missing"):
        plots.figure1(tiny_runs, "tiny")


def test_figures_state_on_the_image_that_a_small_preset_cannot_test_the_paper(
    tiny_runs, tmp_path, monkeypatch
):
    for figure in (plots.figure1, plots.figure2):
        fig = figure(tiny_runs, "tiny")
        caveat = fig.get_suptitle()
        assert caveat.startswith("Preset tiny is not the paper's scale") and "cannot test" in caveat
        fig.canvas.draw()  # drawn inside the saved image, above the axes
        title = fig._suptitle.get_window_extent()
        assert title.y0 >= max(ax.get_window_extent().y1 for ax in fig.axes)
    # At the paper's scale there is nothing to warn of.
    monkeypatch.setattr(plots, "scale_caveat", lambda preset, config_dir=None: "")
    assert plots.figure1(tiny_runs, "tiny").get_suptitle() == ""
