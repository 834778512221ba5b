"""The figures (docs/specification.md §4); each titles its preset, never mistaken for another's."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import PercentFormatter

from repro.analysis import figure_data
from repro.analysis.curves import loss_curves, relative_improvement_curves
from repro.analysis.figure_data import authors_runs, reference_runs, require_baseline, window
from repro.analysis.results import scale_caveat
from repro.analysis.runs import Run, read_runs
from repro.analysis.seeds import read_seed_runs
from repro.analysis.styles import (
    AUTHORS_STYLE,
    SERIES_COLORS,
    SPLIT_STYLE,
    apply_theme,
    bands_title,
    cycle,
    decay_styles,
    legend_beside,
    seed_mean,
    series_styles,
    steps_axis,
    sweep_colors,
)
from repro.config import Preset, load_config
from repro.config.plan import table1_experiments


def _draw_authors(
    top, bottom, runs: dict, baseline: str, colors: dict, window, whose: str = "authors' run"
) -> None:
    """Imported runs (`whose`: the authors' or the audit's) in Figure 1, wide and pale."""
    if not runs:
        return
    losses = loss_curves(runs, first_step=window[0], last_step=window[1])
    for (name, split), curve in losses.groupby(["experiment", "split"], sort=False):
        top.plot(
            curve["step"],
            curve["loss"],
            SPLIT_STYLE[split],
            color=colors[name],
            label=f"{name} ({whose})" if split == "val" else None,
            **AUTHORS_STYLE,
        )
    for split in ("val", "train") if baseline in runs else ():
        curves = relative_improvement_curves(
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


def _mark_off_course(top, off: dict[str, pd.DataFrame], whose: str = "authors'") -> None:
    marked = False
    for steps in off.values():
        top.plot(
            steps["step"],
            steps["val_loss"],
            "x",
            color="#D55E00",
            markersize=9,
            mew=2,
            zorder=4,
            label=None if marked or steps.empty else f"outside the {whose} band",
        )
        marked |= not steps.empty


def figure1(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    seeds: int = 1,
    authors_runs_dir: str | Path | None = None,
    audit_runs_dir: str | Path | None = None,
    audit_logs_dir: str | Path | None = None,
):
    """Figure 1: Table 1's losses above, relative improvement below; imported runs beside ours."""
    apply_theme()
    preset, experiments = load_config(preset, config_dir)
    # Table 1's rows: with report.equal_rate, the linear query at the nonlinear query's rate too,
    # without which the gap drawn would be the learning rate's as much as the query's.
    names = [e.name for e in table1_experiments(preset, experiments)]
    by_seed = read_seed_runs(runs_dir, names, seeds)
    baseline = require_baseline(by_seed[0], runs_dir, experiments.baseline)
    first, last = window(preset)
    styles = series_styles(names, baseline)
    colors = {name: style["color"] for name, style in styles.items()}

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10.5, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    losses = figure_data.mean_losses(by_seed, first, last)
    marks = max(1, losses["step"].nunique() // 12)  # about a dozen markers a line
    for (name, split), curve in losses.groupby(["experiment", "split"], sort=False):
        seed_mean(top, curve, "loss", split, styles[name], marks, label=name)
    theirs = authors_runs(authors_runs_dir, names, baseline)
    _draw_authors(top, bottom, theirs, baseline, colors, (first, last))
    _mark_off_course(top, figure_data.off_course(losses, by_seed, theirs))
    audit = reference_runs(audit_runs_dir, names)
    _draw_authors(top, bottom, audit, baseline, colors, (first, last), whose="audit's run")
    _mark_off_course(top, figure_data.off_course(losses, by_seed, audit), whose="audit's")
    logs = figure_data.stated_logs(audit_logs_dir, preset, experiments.group("table1"))
    _draw_authors(top, bottom, logs.runs, baseline, logs.colors(colors), (first, last), logs.label)
    top.set_ylabel("loss (nats per token)")
    top.set_title(
        f"Training dynamics, steps {first:,}-{last:,} (preset: {preset.name})"
        + bands_title(int(losses["n_seeds"].max()))
    )
    key = "colour and marker: experiment\nsolid: validation, dashed: training"
    legend_beside(top, title=key + logs.note())

    for split in ("val", "train"):
        curves = figure_data.mean_improvements(by_seed, baseline, split, first, last)
        for name, curve in curves.groupby("experiment", sort=False):
            seed_mean(bottom, curve, "rel_improvement", split, styles[name], marks)
    bottom.axhline(0, color=colors[baseline], lw=1, label="baseline")
    bottom.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1))
    bottom.set_ylabel("relative improvement\nover baseline (%)")
    steps_axis(bottom, preset)
    _state_caveat(fig, preset, config_dir)
    fig.tight_layout()
    return fig


def _state_caveat(fig, preset: Preset, config_dir: str | Path | None) -> None:
    """The scale caveat on the image itself: a copied figure keeps it."""
    caveat = scale_caveat(preset, config_dir)
    if caveat:
        fig.suptitle(caveat[0].upper() + caveat[1:], color="#B00000", fontsize="medium")


def figure2(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    authors_runs_dir: str | Path | None = None,
):
    """Figure 2: the sweep's relative improvement; MLP-widened controls in grey dashes."""
    apply_theme()
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group("figure2")
    runs = read_runs(runs_dir, [e.name for e in members])
    baseline = require_baseline(runs, runs_dir, experiments.baseline)
    first, last = window(preset)
    curves = relative_improvement_curves(runs, baseline, first_step=first, last_step=last)
    theirs = authors_runs(authors_runs_dir, [e.name for e in members], baseline)
    their_curves = (
        relative_improvement_curves(theirs, baseline, first_step=first, last_step=last)
        if theirs
        else None
    )
    drawn = set(runs) | set(theirs)
    nonlinear, controls = figure_data.sweep_series(members, drawn, baseline)
    colors = sweep_colors(nonlinear, controls)

    fig, ax = plt.subplots(figsize=(10, 6))
    by_decay = decay_styles(e.optimizer.weight_decay for e in nonlinear)
    lines = [
        (
            e,
            {"color": colors[e.name], **by_decay[e.optimizer.weight_decay]},
            f"{e.name} (lr {e.optimizer.lr_max:g}, wd {e.optimizer.weight_decay:g})",
        )
        for e in nonlinear
    ]
    lines += [
        (
            e,
            {"color": colors[e.name], "linestyle": "--", "zorder": 1.5},
            f"{e.name} (linear query, MLP h/d {e.mlp_ratio:.3g})",
        )
        for e in controls
    ]
    for e, line_style, label in lines:
        for table, style, suffix in (
            (curves, {}, ""),
            (their_curves, AUTHORS_STYLE, " (authors' run)"),
        ):
            curve = table[table["experiment"] == e.name] if table is not None else []
            if len(curve):
                ax.plot(
                    curve["step"],
                    curve["rel_improvement"],
                    label=label + suffix,
                    **{**line_style, **style},
                )
    ax.axhline(0, color="black", lw=1)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=1))
    ax.set_ylabel("relative improvement over baseline (%)\n(validation loss)")
    steps_axis(ax, preset)
    ax.set_title(
        f"Sweep: relative improvement over baseline, steps {first:,}-{last:,} "
        f"(preset: {preset.name})"
    )
    ax.legend(
        fontsize="x-small",
        ncol=3,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.12),
        title="residual GELU query: one colour each (by learning rate), line and marker = "
        "weight decay; grey dashes: linear controls",
        title_fontsize="small",
    )
    _state_caveat(fig, preset, config_dir)
    return fig


def run_curves(runs: Run | dict[str, Run], title: str | None = None):
    """Runs overlaid: training, evaluation losses and learning rate; the legend beside the axes."""
    apply_theme()
    runs = {runs.name: runs} if isinstance(runs, Run) else runs
    fig, (loss_ax, lr_ax) = plt.subplots(
        2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for (label, run), color in zip(runs.items(), cycle(SERIES_COLORS, len(runs))):
        m, evals = run.metrics, run.evals().reset_index()
        loss_ax.plot(m["step"], m["train_loss"], color=color, lw=0.6, alpha=0.35)
        for split in ("val", "train"):
            loss_ax.plot(
                evals["step"],
                evals[f"eval_{split}_loss"],
                SPLIT_STYLE[split],
                color=color,
                marker=".",
                label=f"{label}: evaluation, {split}",
            )
        lr_ax.plot(m["step"], m["lr"], color=color, label=label)
    loss_ax.set_ylabel("loss (nats per token)")
    loss_ax.legend(
        fontsize="small",
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        title="thin pale: training loss per step",
        title_fontsize="small",
    )
    if title is None and len(runs) == 1:
        (run,) = runs.values()
        title = f"{run.name} (preset: {run.record.preset}, status: {run.status})"
    loss_ax.set_title(title or ", ".join(runs))
    lr_ax.set_ylabel("learning rate")
    lr_ax.set_xlabel("optimiser step")
    fig.tight_layout()
    return fig
