"""The figures (docs/specification.md §4), drawn from runs read by repro.analysis.results.

The notebooks call these.

Every figure titles its preset: a smoke figure and a paper figure are never mistaken for each other.
Solid lines are validation, dashed lines training (the periodic evaluation losses), as in the paper.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, PercentFormatter

from repro.analysis import results
from repro.analysis.seeds import over_seeds, paired, read_seed_runs
from repro.config import Preset, load_config
from repro.rundir import RunError

SPLIT_STYLE = {"val": "-", "train": "--"}
# Okabe & Ito's colour-blind-safe palette (the baseline black) and a marker per series: every
# series differs in colour and marker, so none is lost in grey print or to colour blindness.
SERIES_COLORS = ["#000000", "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"]
SERIES_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

AUTHORS_STYLE = {"lw": 4.5, "alpha": 0.3}  # the authors' imported runs: wide, pale, same colour


def _style():
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.2)
    matplotlib.rcParams.update({"figure.dpi": 110, "savefig.dpi": 200, "lines.linewidth": 1.6})


def _steps_axis(ax, preset: Preset):
    """Steps as 'k' on the paper's scale (thousands of optimiser steps), plain otherwise."""
    if preset.report.table_step >= 10_000:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:g}k"))
    ax.set_xlabel("optimiser step")


def _window(preset: Preset) -> tuple[int, int]:
    """Steps 1k..59k on the paper preset: from the first evaluation after 0 to the table step."""
    return preset.train.eval_interval, preset.report.table_step


def _require_baseline(runs: dict, runs_dir, baseline: str) -> str:
    if baseline not in runs:
        raise RunError(f"{Path(runs_dir) / baseline}: the baseline run is missing")
    return baseline


def _band(ax, curve: pd.DataFrame, value: str, color) -> None:
    """The 95% interval over seeds around a mean curve (nothing with one seed: NaN bounds)."""
    ax.fill_between(
        curve["step"],
        curve[f"{value}_ci_low"],
        curve[f"{value}_ci_high"],
        color=color,
        alpha=0.2,
        lw=0,
    )


def series_styles(names: list[str], baseline: str) -> dict[str, dict]:
    """Colour, marker and drawing order of each experiment: the baseline first, black, on top."""
    ordered = [baseline] + [n for n in names if n != baseline]
    return {
        name: {"color": color, "marker": marker, "zorder": 3 if name == baseline else 2}
        for name, color, marker in zip(ordered, SERIES_COLORS, SERIES_MARKERS)
    }


def _authors_runs(authors_runs_dir, names: list[str], baseline: str) -> dict:
    """The imported authors' runs among `names` (none without their baseline or a folder)."""
    if authors_runs_dir is None or not Path(authors_runs_dir).is_dir():
        return {}
    runs = results.read_runs(authors_runs_dir, names)
    return runs if baseline in runs else {}


def _draw_authors(top, bottom, runs: dict, baseline: str, colors: dict, window) -> None:
    """The authors' runs in Figure 1: their losses on top, improvements over their baseline below,
    in wide pale lines of our colours, labelled "(authors' run)"."""
    if not runs:
        return
    losses = results.loss_curves(runs, first_step=window[0], last_step=window[1])
    for (name, split), curve in losses.groupby(["experiment", "split"], sort=False):
        top.plot(
            curve["step"],
            curve["loss"],
            SPLIT_STYLE[split],
            color=colors[name],
            label=f"{name} (authors' run)" if split == "val" else None,
            **AUTHORS_STYLE,
        )
    for split in ("val", "train"):
        curves = results.relative_improvement_curves(
            runs, baseline, split=split, first_step=window[0], last_step=window[1]
        )
        for name, curve in curves.groupby("experiment", sort=False):
            bottom.plot(
                curve["step"],
                curve["rel_improvement"],
                SPLIT_STYLE[split],
                color=colors[name],
                **AUTHORS_STYLE,
            )


def figure1(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    seeds: int = 1,
    authors_runs_dir: str | Path | None = None,
):
    """Figure 1: training dynamics of the Table 1 runs. Top: evaluation losses (solid val, dashed
    train). Bottom: relative improvement over the baseline per evaluation step. Over several
    seeds: mean curves, with the 95% t-interval over seeds as a band around validation's (and
    the relative improvement paired with the baseline seed by seed, repro.analysis.seeds).
    Runs imported from the authors' artefacts (authors_runs_dir), if any, are drawn beside ours."""
    _style()
    preset, experiments = load_config(preset, config_dir)
    names = [e.name for e in experiments.group("table1")]
    by_seed = read_seed_runs(runs_dir, names, seeds)
    baseline = _require_baseline(by_seed[0], runs_dir, experiments.baseline)
    first, last = _window(preset)
    styles = series_styles(names, baseline)
    colors = {name: style["color"] for name, style in styles.items()}

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    losses = over_seeds(
        by_seed,
        lambda runs: results.loss_curves(runs, first, last),
        ["experiment", "split", "step"],
        "loss",
    )
    marks = max(1, losses["step"].nunique() // 12)  # about a dozen markers a line
    for (name, split), curve in losses.groupby(["experiment", "split"], sort=False):
        top.plot(
            curve["step"],
            curve["loss_mean"],
            SPLIT_STYLE[split],
            **styles[name],
            markevery=marks,
            markersize=5,
            fillstyle="full" if split == "val" else "none",
            label=name if split == "val" else None,
        )
        if split == "val":
            _band(top, curve, "loss", colors[name])
    _draw_authors(
        top,
        bottom,
        _authors_runs(authors_runs_dir, names, baseline),
        baseline,
        colors,
        (first, last),
    )
    top.set_ylabel("loss (nats per token)")
    n = int(losses["n_seeds"].max())
    top.set_title(
        f"Training dynamics, steps {first:,}-{last:,} (preset: {preset.name})"
        + (f"\nmean of {n} seeds, bands: 95% t-interval" if n > 1 else "")
    )
    top.legend(
        title="colour and marker: experiment\nsolid: validation, dashed: training", fontsize="small"
    )

    for split in ("val", "train"):
        curves = over_seeds(
            paired(by_seed, baseline),
            lambda runs: results.relative_improvement_curves(
                runs, baseline, split=split, first_step=first, last_step=last
            ),
            ["experiment", "step"],
            "rel_improvement",
        )
        for name, curve in curves.groupby("experiment", sort=False):
            bottom.plot(
                curve["step"],
                curve["rel_improvement_mean"],
                SPLIT_STYLE[split],
                **styles[name],
                markevery=marks,
                markersize=5,
                fillstyle="full" if split == "val" else "none",
            )
            if split == "val":
                _band(bottom, curve, "rel_improvement", colors[name])
    bottom.axhline(0, color=colors[baseline], lw=1, label="baseline")
    bottom.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1))
    bottom.set_ylabel("relative improvement\nover baseline (%)")
    _steps_axis(bottom, preset)
    fig.tight_layout()
    return fig


def figure2(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    authors_runs_dir: str | Path | None = None,
):
    """Figure 2: relative validation improvement over the baseline of the sweep (group figure2):
    nonlinear configurations in one colour family (by learning rate), MLP-widened linear
    controls in grey dashes; the authors' imported runs, if any, in wide pale lines beside."""
    _style()
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group("figure2")
    runs = results.read_runs(runs_dir, [e.name for e in members])
    baseline = _require_baseline(runs, runs_dir, experiments.baseline)
    first, last = _window(preset)
    curves = results.relative_improvement_curves(runs, baseline, first_step=first, last_step=last)
    theirs = _authors_runs(authors_runs_dir, [e.name for e in members], baseline)
    their_curves = (
        results.relative_improvement_curves(theirs, baseline, first_step=first, last_step=last)
        if theirs
        else None
    )
    drawn = set(runs) | set(theirs)
    nonlinear = [e for e in members if e.query_mode != "linear" and e.name in drawn]
    controls = [
        e for e in members if e.query_mode == "linear" and e.name != baseline and e.name in drawn
    ]
    palette = dict(
        zip(
            [e.name for e in sorted(nonlinear, key=lambda e: e.optimizer.lr_max)],
            sns.color_palette("viridis", len(nonlinear)),
        )
    )
    greys = dict(
        zip(
            [e.name for e in sorted(controls, key=lambda e: e.mlp_ratio)],
            sns.color_palette("Greys", len(controls) + 2)[2:],
        )
    )

    fig, ax = plt.subplots(figsize=(10, 6))
    # the weight decay most of the sweep uses (2^-5) gets solid lines
    decays = [wd for wd, _ in Counter(e.optimizer.weight_decay for e in nonlinear).most_common()]
    dash = dict(zip(decays, ["-", "-.", ":", (0, (5, 1, 1, 1, 1, 1))]))
    lines = [
        (
            e,
            palette[e.name],
            dash.get(e.optimizer.weight_decay, "-"),
            f"{e.name} (lr {e.optimizer.lr_max:g}, wd {e.optimizer.weight_decay:g})",
        )
        for e in nonlinear
    ]
    lines += [
        (e, greys[e.name], "--", f"{e.name} (linear query, MLP h/d {e.mlp_ratio:.3g})")
        for e in controls
    ]
    for e, color, linestyle, label in lines:
        for table, style, suffix in (
            (curves, {}, ""),
            (their_curves, AUTHORS_STYLE, " (authors' run)"),
        ):
            curve = table[table["experiment"] == e.name] if table is not None else []
            if len(curve):
                ax.plot(
                    curve["step"],
                    curve["rel_improvement"],
                    linestyle=linestyle,
                    color=color,
                    label=label + suffix,
                    **style,
                )
    ax.axhline(0, color="black", lw=1)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1))
    ax.set_ylabel("relative improvement over baseline (%)\n(validation loss)")
    _steps_axis(ax, preset)
    ax.set_title(
        f"Sweep: relative improvement over baseline, steps {first:,}-{last:,} "
        f"(preset: {preset.name})"
    )
    ax.legend(
        fontsize="x-small",
        ncol=3,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12),
        title="residual GELU query: colour = learning rate, line = weight decay; "
        "grey dashes: linear controls",
        title_fontsize="small",
    )
    return fig


def run_curves(run: results.Run, title: str | None = None):
    """One run's curves: per-step training loss, evaluation losses, learning rate."""
    _style()
    fig, (loss_ax, lr_ax) = plt.subplots(
        2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    m = run.metrics
    loss_ax.plot(m["step"], m["train_loss"], color="0.7", lw=0.8, label="train (per step)")
    evals = run.evals().reset_index()
    for split in ("val", "train"):
        loss_ax.plot(
            evals["step"],
            evals[f"eval_{split}_loss"],
            SPLIT_STYLE[split],
            marker=".",
            label=f"evaluation, {split}",
        )
    loss_ax.set_ylabel("loss (nats per token)")
    loss_ax.legend(fontsize="small")
    loss_ax.set_title(title or f"{run.name} (preset: {run.record.preset}, status: {run.status})")
    lr_ax.plot(m["step"], m["lr"])
    lr_ax.set_ylabel("learning rate")
    lr_ax.set_xlabel("optimiser step")
    fig.tight_layout()
    return fig


def save(fig, *paths: str | Path) -> list[Path]:
    """Save a figure to each path (the format from the suffix: .png, .pdf), creating folders."""
    saved = []
    for path in map(Path, paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, bbox_inches="tight")
        saved.append(path)
    return saved


def table_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1 formatted for reading: percentages, 4-decimal losses, exact parameter counts."""
    out = table.copy()
    for col in ("rel_improvement", "paper_rel_improvement"):
        out[col] = out[col].map(lambda v: "" if pd.isna(v) else f"{v:.2%}")
    for col in ("val_loss", "paper_val_loss"):
        out[col] = out[col].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
    out["non_embedding_params"] = out["non_embedding_params"].map(
        lambda v: "" if pd.isna(v) else f"{v:,}"
    )
    return out
