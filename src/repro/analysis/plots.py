"""The figures (docs/specification.md §4), drawn from runs read by repro.analysis.results.

The notebooks call these.

Every figure titles its preset: a smoke figure and a paper figure are never mistaken for each other.
Solid lines are validation, dashed lines training (the periodic evaluation losses), as in the paper.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, PercentFormatter

from repro.analysis import compare, results
from repro.analysis.seeds import over_seeds, paired, read_seed_runs
from repro.config import Preset, load_config
from repro.files import atomic_write, make_dir
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


# Below this many seeds a curve's band is the seeds' range: at 2 seeds the 95% t-interval is
# 12.7 standard errors wide on each side, a band that hides every curve of the figure.
INTERVAL_SEEDS = 3


def _band(ax, curve: pd.DataFrame, value: str, color) -> None:
    """Around a mean curve over seeds: the 95% interval, or the seeds' range (min to max) where
    fewer than INTERVAL_SEEDS seeds have it; nothing with one seed."""
    few = curve["n_seeds"] < INTERVAL_SEEDS
    ax.fill_between(
        curve["step"],
        curve[f"{value}_min"].where(few, curve[f"{value}_ci_low"]),
        curve[f"{value}_max"].where(few, curve[f"{value}_ci_high"]),
        color=color,
        alpha=0.2,
        lw=0,
    )


def _bands_title(n_seeds: int) -> str:
    """What the bands of a figure over n_seeds seeds are."""
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


def _legend_beside(ax, **kwargs) -> None:
    """The legend right of the axes, outside them: it never covers a curve."""
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize="small",
        borderaxespad=0,
        title_fontsize="small",
        **kwargs,
    )


def _reference_runs(runs_dir, names: list[str]) -> dict:
    """The imported runs (the authors', the audit's) among `names` in runs_dir, if a folder."""
    if runs_dir is None or not Path(runs_dir).is_dir():
        return {}
    return results.read_runs(runs_dir, names)


def _authors_runs(authors_runs_dir, names: list[str], baseline: str) -> dict:
    """The imported authors' runs among `names` (none without their baseline or a folder)."""
    runs = _reference_runs(authors_runs_dir, names)
    return runs if baseline in runs else {}


def _draw_authors(
    top, bottom, runs: dict, baseline: str, colors: dict, window, whose: str = "authors'"
) -> None:
    """Imported runs in Figure 1 (the authors', or the audit's: `whose`): their losses on top,
    improvements over their baseline below (where they have it), in wide pale lines of our
    colours, labelled "(authors' run)" or "(audit's run)"."""
    if not runs:
        return
    losses = results.loss_curves(runs, first_step=window[0], last_step=window[1])
    for (name, split), curve in losses.groupby(["experiment", "split"], sort=False):
        top.plot(
            curve["step"],
            curve["loss"],
            SPLIT_STYLE[split],
            color=colors[name],
            label=f"{name} ({whose} run)" if split == "val" else None,
            **AUTHORS_STYLE,
        )
    for split in ("val", "train") if baseline in runs else ():
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


def _mark_off_course(
    top, losses: pd.DataFrame, by_seed: dict, theirs: dict, whose: str = "authors'"
) -> None:
    """Where our mean validation loss leaves the authors' band (their run's loss plus or minus
    the tolerance of repro.analysis.compare: our seeds' spread, else its fixed margin): a red
    cross on our curve at each such step."""
    marked = False
    for name, their_run in theirs.items():
        seeds = [runs[name] for runs in by_seed.values() if name in runs]
        tolerance = (
            compare.measured_tolerance(seeds) if len(seeds) >= 2 else compare.DEFAULT_TOLERANCE
        )
        ours = losses[(losses["experiment"] == name) & (losses["split"] == "val")]
        table = compare.compare_curves(
            ours.set_index("step")["loss_mean"], their_run.evals()["eval_val_loss"], tolerance
        )
        off = table[table["verdict"] != "within"]
        top.plot(
            off["step"],
            off["val_loss"],
            "x",
            color="#D55E00",
            markersize=9,
            mew=2,
            zorder=4,
            label=None if marked or off.empty else f"outside the {whose} band",
        )
        marked |= not off.empty


def figure1(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    seeds: int = 1,
    authors_runs_dir: str | Path | None = None,
    audit_runs_dir: str | Path | None = None,
):
    """Figure 1: training dynamics of the Table 1 runs. Top: evaluation losses (solid val, dashed
    train). Bottom: relative improvement over the baseline per evaluation step. Over several
    seeds: mean curves, with a band around validation's (and the relative improvement paired
    with the baseline seed by seed, repro.analysis.seeds): the 95% t-interval over seeds, the
    seeds' range below INTERVAL_SEEDS seeds; the title says which.
    Runs imported from the authors' artefacts (authors_runs_dir), if any, are drawn beside ours,
    and a red cross marks each step where our validation loss leaves their band; so are the
    audit's logs imported as our experiments (audit_runs_dir, repro.authors.audit)."""
    _style()
    preset, experiments = load_config(preset, config_dir)
    names = [e.name for e in experiments.group("table1")]
    by_seed = read_seed_runs(runs_dir, names, seeds)
    baseline = _require_baseline(by_seed[0], runs_dir, experiments.baseline)
    first, last = _window(preset)
    styles = series_styles(names, baseline)
    colors = {name: style["color"] for name, style in styles.items()}

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10.5, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
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
    theirs = _authors_runs(authors_runs_dir, names, baseline)
    _draw_authors(top, bottom, theirs, baseline, colors, (first, last))
    _mark_off_course(top, losses, by_seed, theirs)
    audit = _reference_runs(audit_runs_dir, names)
    _draw_authors(top, bottom, audit, baseline, colors, (first, last), whose="audit's")
    _mark_off_course(top, losses, by_seed, audit, whose="audit's")
    top.set_ylabel("loss (nats per token)")
    top.set_title(
        f"Training dynamics, steps {first:,}-{last:,} (preset: {preset.name})"
        + _bands_title(int(losses["n_seeds"].max()))
    )
    _legend_beside(top, title="colour and marker: experiment\nsolid: validation, dashed: training")

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
    _state_caveat(fig, preset, config_dir)
    fig.tight_layout()
    return fig


def _state_caveat(fig, preset: Preset, config_dir: str | Path | None) -> None:
    """On the image itself, above everything, where the preset is not at the paper's scale: a
    figure copied out of the report (a slide, a chat) still says its numbers cannot test the
    paper."""
    caveat = results.scale_caveat(preset, config_dir)
    if caveat:
        fig.suptitle(caveat[0].upper() + caveat[1:], color="#B00000", fontsize="medium")


def figure2(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    authors_runs_dir: str | Path | None = None,
):
    """Figure 2: relative validation improvement over the baseline of the sweep (group figure2):
    nonlinear configurations one colour each (in order of learning rate), MLP-widened linear
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
            _distinct_colors(len(nonlinear)),
        )
    )
    greys = dict(
        zip(
            [e.name for e in sorted(controls, key=lambda e: e.mlp_ratio)],
            sns.color_palette("Greys", len(controls) + 2)[2:],
        )
    )

    fig, ax = plt.subplots(figsize=(10, 6))
    decay_styles = _decay_styles(e.optimizer.weight_decay for e in nonlinear)
    lines = [
        (
            e,
            {"color": palette[e.name], **decay_styles[e.optimizer.weight_decay]},
            f"{e.name} (lr {e.optimizer.lr_max:g}, wd {e.optimizer.weight_decay:g})",
        )
        for e in nonlinear
    ]
    lines += [
        (
            e,
            {"color": greys[e.name], "linestyle": "--", "zorder": 1.5},
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
        title="residual GELU query: one colour each (by learning rate), line and marker = "
        "weight decay; grey dashes: linear controls",
        title_fontsize="small",
    )
    _state_caveat(fig, preset, config_dir)
    return fig


def _distinct_colors(n: int) -> list:
    """n colours no two alike: tab20's ten dark hues, then its ten light ones (then again)."""
    tab20 = sns.color_palette("tab20", 20)
    return _cycle([tab20[i] for i in [*range(0, 20, 2), *range(1, 20, 2)]], n)


def _decay_styles(decays) -> dict[float, dict]:
    """Line style per weight decay: the one most of the sweep uses (2^-5) solid and below; each
    other dotted or dash-dotted, wider, with markers and on top, so that none hides under the
    solid lines."""
    common = [wd for wd, _ in Counter(decays).most_common()]
    others = [(":", "o"), ("-.", "s"), ((0, (5, 1, 1, 1)), "^")]
    styles = {common[0]: {"linestyle": "-", "lw": 1.6, "zorder": 2}} if common else {}
    for wd, (linestyle, marker) in zip(common[1:], _cycle(others, len(common) - 1)):
        styles[wd] = {"linestyle": linestyle, "marker": marker, "lw": 2.4, "zorder": 3}
    return styles


def run_curves(runs: results.Run | dict[str, results.Run], title: str | None = None):
    """Runs overlaid (one, or a dict label -> Run as read by results.read_run_list): per-step
    training loss (thin, pale), evaluation losses (solid validation, dashed training) and the
    learning rate, one colour per run; the legend beside the axes, never over a curve."""
    _style()
    runs = {runs.name: runs} if isinstance(runs, results.Run) else runs
    fig, (loss_ax, lr_ax) = plt.subplots(
        2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for (label, run), color in zip(runs.items(), _cycle(SERIES_COLORS, len(runs))):
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


def _cycle(colors: list, n: int) -> list:
    """n colours, repeating the list when it is shorter."""
    return [colors[i % len(colors)] for i in range(n)]


def save(fig, *paths: str | Path) -> list[Path]:
    """Save a figure to each path (the format from the suffix: .png, .pdf; .html: the PNG inside
    an <img> tag, which Snakemake's report shows on its page), creating folders."""
    saved = []
    for path in map(Path, paths):
        make_dir(path.parent)
        if path.suffix == ".html":
            png = io.BytesIO()
            fig.savefig(png, format="png", bbox_inches="tight")
            data = base64.b64encode(png.getvalue()).decode("ascii")
            with atomic_write(path) as f:
                f.write(f'<img src="data:image/png;base64,{data}" style="max-width: 100%">\n')
        else:
            with atomic_write(path, "wb") as f:
                fig.savefig(f, format=path.suffix[1:].lower(), bbox_inches="tight")
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
