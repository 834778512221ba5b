"""A group's settings' validation losses: 95% intervals, or points per seed below three."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

MIN_SEEDS_FOR_INTERVAL = 3


def final_losses(table: pd.DataFrame, losses: pd.DataFrame, title: str):
    """One row per setting of `table` (each model's best in bold) against each seed's loss."""
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(table) + 1.4))
    for i, row in enumerate(table.itertuples()):
        if row.n_seeds >= MIN_SEEDS_FOR_INTERVAL:
            error = [
                [row.val_loss_mean - row.val_loss_ci_low],
                [row.val_loss_ci_high - row.val_loss_mean],
            ]
            ax.errorbar(row.val_loss_mean, i, xerr=error, fmt="o", color="C0", capsize=3)
        else:
            seeds = losses[row.experiment].dropna() if row.experiment in losses else []
            ax.plot(seeds, [i] * len(seeds), "o", color="C1", fillstyle="none")
    ax.set_yticks(range(len(table)), table["experiment"])
    for label, best in zip(ax.get_yticklabels(), table["best"]):
        label.set_fontweight("bold" if best else "normal")
    ax.invert_yaxis()
    ax.set_xlabel(f"validation loss at step {table['step'].iloc[0]} (bold: each model's best)")
    seeds = int(table["seeds"].iloc[0])
    how = "mean and 95% interval" if seeds >= MIN_SEEDS_FOR_INTERVAL else "one point per seed"
    ax.set_title(f"{title}: {how} over {seeds} seed{'s' * (seeds > 1)}")
    ax.grid(axis="x", alpha=0.4)
    return fig
