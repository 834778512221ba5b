"""The query ablation (docs/annex/ablation.md): which part of the nonlinear query makes its gain?"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from repro.analysis.seeds import PAIRED_COLUMNS, paired_difference
from repro.annex.groups.tuning import Settings, settings
from repro.config import Experiment, Preset, load_config

GROUP = "query_ablation"
# An arm: a query mode, with (True) or without qk_norm, and its attention_gate.
Arm = tuple[str, bool, str | None]
REFERENCE: Arm = ("linear", False, None)  # what every arm of the table is paired with
# (claim, the arm that should be ahead, the arm it is compared with)
CLAIMS: list[tuple[str, Arm, Arm]] = [
    (
        "the gain needs the nonlinearity",
        ("residual_gelu", False, None),
        ("residual_bottleneck_linear", False, None),
    ),
    # both arms with the normalisation that stabilises the linear query
    ("the gain survives QK-norm", ("residual_gelu", True, None), ("linear", True, None)),
    (
        "the nonlinear query beats the best-tuned stabilised baseline",
        ("residual_gelu", False, None),
        ("linear", True, None),
    ),
    # W_Q's d^2 parameters moved to an attention-output gate (Qiu et al. 2025): another nonlinearity
    (
        "the nonlinear query beats the parameter-matched gate",
        ("residual_gelu", False, None),
        ("identity", False, "elementwise"),
    ),
]
ABLATION_COLUMNS = [
    "arm",
    "query_mode",
    "qk_norm",
    "attention_gate",
    "best",
    "lr_max",
    "lr_min",
    "weight_decay",
    "settings",
    "settings_complete",
    "step",
    "n_seeds",
    "val_loss_mean",
    "val_loss_sd",
    "val_loss_ci_low",
    "val_loss_ci_high",
    "reference",
    *PAIRED_COLUMNS,
    "preset",
    "caveat",
    "config_differences",
]


def arm_of(experiment: Experiment) -> Arm:
    m = experiment.model
    return experiment.query_mode, bool(m.get("qk_norm", False)), m.get("attention_gate")


def arm_name(arm: Arm) -> str:
    return arm[0] + " + qk_norm" * arm[1] + (f" + {arm[2]} gate" if arm[2] else "")


@dataclass(frozen=True)
class Ablation:
    """The ablation at one preset; `missing`: runs with no table-step loss and no divergence."""

    table: pd.DataFrame
    settings: Settings
    members: dict[Arm, list[str]]
    missing: list[str]
    preset: Preset

    def best(self, arm: Arm) -> str | None:
        """The arm's best setting (None while none is complete)."""
        row = self.table[self.table["arm"] == arm_name(arm)]
        return None if row.empty or pd.isna(row["best"].iloc[0]) else row["best"].iloc[0]

    def compare(self, ours: Arm, reference: Arm) -> pd.Series:
        return paired_difference(self.settings.losses, self.best(ours), self.best(reference))

    def missing_of(self, *arms: Arm) -> list[str]:
        names = {name for arm in arms for name in self.members.get(arm, [])}
        return [run for run in self.missing if run.rsplit("/", 1)[-1] in names]


def ablation(
    runs_dir: str | Path,
    preset: str | Preset,
    seeds: int = 1,
    config_dir: str | Path | None = None,
) -> Ablation:
    preset, experiments = load_config(preset, config_dir)
    members = experiments.group(GROUP)
    result = settings(runs_dir, preset, seeds, config_dir, members)
    by_arm: dict[Arm, list[str]] = {}
    for e in members:
        by_arm.setdefault(arm_of(e), []).append(e.name)
    table = result.table.set_index("experiment")
    rows = []
    for arm, names in by_arm.items():
        own = table.loc[names]
        best = own.index[own["best"]]
        row = {
            "arm": arm_name(arm),
            "query_mode": arm[0],
            "qk_norm": arm[1],
            "attention_gate": arm[2],
            "best": best[0] if len(best) else None,
            "settings": len(names),
            "settings_complete": int(((own["n_seeds"] == seeds) & (own["n_diverged"] == 0)).sum()),
            "config_differences": " | ".join(
                f"{name}: {d}" for name, d in own["config_differences"].items() if d
            ),
        }
        if len(best):
            chosen = own.loc[best[0]]
            row |= chosen[["lr_max", "lr_min", "weight_decay", "n_seeds"]].to_dict()
            row |= chosen.filter(like="val_loss").to_dict()
        rows.append(row)
    arms = pd.DataFrame(rows)
    best = dict(zip(by_arm, arms["best"]))
    reference = best.get(REFERENCE)
    pairs = [
        paired_difference(result.losses, best[arm], reference).to_dict() | {"reference": reference}
        if pd.notna(reference) and pd.notna(best[arm])
        else {}
        for arm in by_arm
    ]
    arms = arms.join(pd.DataFrame(pairs, index=arms.index)).assign(
        step=preset.report.table_step,
        preset=preset.name,
        caveat=result.table["caveat"].iloc[0],
    )
    return Ablation(arms.reindex(columns=ABLATION_COLUMNS), result, by_arm, result.missing, preset)
