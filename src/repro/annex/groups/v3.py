"""Version 3 (docs/annex/v3.md): the claim of the paper's third version, on the recipe behind it.

Runs are read at their last evaluation; each model by its best setting (repro.annex.groups.tuning).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from repro.annex.groups.tuning import TUNING_COLUMNS, settings
from repro.config import Experiment, Preset, load_config, resolve_run
from repro.model import parameter_counts

GROUP = "v3"
NONLINEAR = "residual_gelu"
# Version 3's recipe, that of its best nonlinear setting: weight decay 0.1, cosine to 2e-5.
RECIPE = {"weight_decay": 0.1, "lr_min": 2.0e-5}
# (claim, the setting its best nonlinear setting is paired with: a role of Version3.roles)
CLAIMS = [
    ("version 3: beats the linear baseline", "baseline"),  # the abstract's 2.40%
    ("version 3: beats the linear query on the same recipe", "same recipe"),
]
D2Z_CLAIM = "version 3: beats the tuned decay-to-zero linear baseline"
PARAMETERS_CLAIM = "version 3: worth more than 30% more non-embedding parameters"
CLAIM_NAMES = [*(c for c, _ in CLAIMS), D2Z_CLAIM, PARAMETERS_CLAIM]
V3_COLUMNS = [*TUNING_COLUMNS[:7], "non_embedding_params", "extra_params", *TUNING_COLUMNS[7:]]


@dataclass(frozen=True)
class Version3:
    """Group `v3` at one preset, as repro.annex.groups.tuning's Settings."""

    table: pd.DataFrame
    losses: pd.DataFrame
    missing: list[str]
    preset: Preset
    step: int
    seeds: int
    runs_dir: str | Path

    def best(self, rows: pd.Series) -> str | None:
        """The best of the settings `rows` selects: the lowest mean loss among those every seed
        has and none diverged; None where there is none."""
        t = self.table
        t = t[rows & (t["n_seeds"] == self.seeds) & (t["n_diverged"] == 0)]
        return None if t.empty else t.loc[t["val_loss_mean"].idxmin(), "experiment"]

    def roles(self, baseline: str) -> dict[str, pd.Series]:
        t = self.table
        linear = (t["query_mode"] == "linear") & (t["mlp_ratio"] == 4)
        recipe = (t["weight_decay"] == RECIPE["weight_decay"]) & (t["lr_min"] == RECIPE["lr_min"])
        return {
            "nonlinear": t["query_mode"] == NONLINEAR,
            "baseline": t["experiment"] == baseline,
            "same recipe": linear & recipe,
            "wider": (t["query_mode"] == "linear") & (t["mlp_ratio"] > 4),
        }


def non_embedding(preset: Preset, experiment: Experiment) -> int:
    return parameter_counts(resolve_run(preset, experiment).model)["non_embedding_params"]


def version3(
    runs_dir: str | Path,
    preset: str | Preset,
    seeds: int = 1,
    config_dir: str | Path | None = None,
) -> Version3:
    """Each `v3` setting at its last evaluation, its parameter excess; each model's best."""
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group(GROUP)
    result = settings(runs_dir, preset, seeds, config_dir, members, last=True)
    params = [non_embedding(preset, e) for e in members]
    base = non_embedding(preset, experiments[experiments.baseline])
    table = result.table.assign(
        non_embedding_params=params, extra_params=[p / base - 1 for p in params]
    )
    return Version3(
        table[V3_COLUMNS], result.losses, result.missing, preset, result.step, seeds, runs_dir
    )
