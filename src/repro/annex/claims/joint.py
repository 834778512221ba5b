"""Every claim checked together: the text's (repro.analysis.claims, Table 1's rows and the
divergence) and those the groups trained beside Table 1 answer (repro.annex.claims.groups), with
Holm's correction over all of them: results/claims_joint.csv, and the claims version 3's and the
evidence table read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from repro.analysis.claims import claim_rows, claims_table
from repro.annex.claims import groups
from repro.config import Preset, load_config


def joint_claims(
    runs_dir: str | Path,
    preset: str | Preset,
    config_dir: str | Path | None = None,
    divergence_step: int | None = None,
    seeds: int = 1,
) -> pd.DataFrame:
    """The text's claims and each group's, one row per (claim, experiment), corrected together."""
    preset, experiments = load_config(preset, config_dir)
    rows = claim_rows(runs_dir, preset, experiments, divergence_step, seeds)
    for group, answer in groups.GROUPS.items():
        answers = answer(runs_dir, preset, experiments, seeds, config_dir)
        rows += [(*row[:4], group, *row[4:]) for row in answers]
    rows = [(*row, float("nan")) if len(row) == 5 else row for row in rows]  # no p-value: NaN
    return claims_table(rows, preset, config_dir)
