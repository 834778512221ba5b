"""How the figures look (repro.analysis.plots); as in the paper, solid lines are validation, dashed
lines training."""

from __future__ import annotations

from collections import Counter

import matplotlib
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter

from repro.config import Preset

SPLIT_STYLE = {"val": "-", "train": "--"}
# Okabe & Ito's colour-blind-safe palette (the baseline black) and a marker per series: every
# series differs in colour and marker, so none is lost in grey print or to colour blindness.
SERIES_COLORS = ["#000000", "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"]
SERIES_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

AUTHORS_STYLE = {"lw": 4.5, "alpha": 0.3}  # the authors' imported runs: wide, pale, same colour


def apply_theme():
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.2)
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 200, "lines.linewidth": 1.6})


def steps_axis(ax, preset: Preset):
    """Steps as 'k' on the paper's scale (thousands of optimiser steps), plain otherwise."""
    if preset.report.table_step >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
    ax.set_xlabel("optimiser step")


# Below this many seeds a curve's band is the seeds' range: at 2 seeds the 95% t-interval is
# 12.7 standard errors wide on each side, a band that hides every curve of the figure.
INTERVAL_SEEDS = 3


def band(ax, curve: pd.DataFrame, value: str, color) -> None:
    """Around a mean curve: the 95% interval, or the seeds' range below INTERVAL_SEEDS seeds."""
    few = curve["n_seeds"] < INTERVAL_SEEDS
    ax.fill_between(
        curve["step"],
        curve[f"{value}_min"].where(few, curve[f"{value}_ci_low"]),
        curve[f"{value}_max"].where(few, curve[f"{value}_ci_high"]),
        color=color,
        alpha=0.2,
        lw=0,
    )


def seed_mean(ax, curve: pd.DataFrame, value: str, split: str, style: dict, marks: int, label=None):
    """A mean curve over the seeds of one split: validation solid, filled and banded (and labelled
    `label`), training dashed and hollow."""
    val = split == "val"
    ax.plot(
        curve["step"],
        curve[f"{value}_mean"],
        SPLIT_STYLE[split],
        **style,
        markevery=marks,
        markersize=5,
        fillstyle="full" if val else "none",
        label=label if val else None,
    )
    if val:
        band(ax, curve, value, style["color"])


def bands_title(n_seeds: int) -> str:
    if n_seeds < 2:
        return ""
    bands = "95% t-interval" if n_seeds >= INTERVAL_SEEDS else "min to max over the seeds"
    return f"\nmean of {n_seeds} seeds, bands: {bands}"


def series_styles(names: list[str], baseline: str) -> dict[str, dict]:
    """Colour, marker, width and drawing order of each experiment: the baseline first, black,
    thinnest, on top; each later one wider and lower, so that curves that coincide (mlp4.75 and
    the baseline on a small preset) show as nested stripes rather than one hiding the other."""
    ordered = [baseline] + [n for n in names if n != baseline]
    return {
        name: {"color": color, "marker": marker, "zorder": 3 - 0.1 * k, "lw": 1.4 + 0.7 * k}
        for k, (name, color, marker) in enumerate(zip(ordered, SERIES_COLORS, SERIES_MARKERS))
    }


def legend_beside(ax, **kwargs) -> None:
    """The legend right of the axes, outside them: it never covers a curve."""
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize="small",
        borderaxespad=0,
        title_fontsize="small",
        **kwargs,
    )


def distinct_colors(n: int) -> list:
    """n colours no two alike: tab20's ten dark hues, then its ten light ones (then again)."""
    tab20 = sns.color_palette("tab20", 20)
    return cycle([tab20[i] for i in [*range(0, 20, 2), *range(1, 20, 2)]], n)


def sweep_colors(nonlinear: list, controls: list) -> dict[str, tuple]:
    """Figure 2's colours: nonlinear ones distinct by rate; linear ones greys, darker as wider."""
    by_lr = sorted(nonlinear, key=lambda e: e.optimizer.lr_max)
    by_ratio = sorted(controls, key=lambda e: e.mlp_ratio)
    greys = sns.color_palette("Greys", len(controls) + 2)[2:]
    return dict(zip([e.name for e in by_lr], distinct_colors(len(nonlinear)))) | dict(
        zip([e.name for e in by_ratio], greys)
    )


def decay_styles(decays) -> dict[float, dict]:
    """Line style per weight decay: the sweep's usual one (2^-5) solid; each other dotted or
    dash-dotted, wider and on top, so that none hides under the solid lines."""
    common = [wd for wd, _ in Counter(decays).most_common()]
    others = [(":", "o"), ("-.", "s"), ((0, (5, 1, 1, 1)), "^")]
    styles = {common[0]: {"linestyle": "-", "lw": 1.6, "zorder": 2}} if common else {}
    for wd, (linestyle, marker) in zip(common[1:], cycle(others, len(common) - 1)):
        styles[wd] = {"linestyle": linestyle, "marker": marker, "lw": 2.4, "zorder": 3}
    return styles


def cycle(colors: list, n: int) -> list:
    return [colors[i % len(colors)] for i in range(n)]
