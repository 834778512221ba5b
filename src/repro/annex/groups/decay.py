"""Decay to zero (docs/annex/decay_to_zero.md): does the nonlinear query's gain survive the linear
baseline's best schedule?

A run that decays to zero is read where its decay ends, at its last evaluation, not at the
preset's table step; each model's best rate over both schedules is paired seed by seed, as
repro.annex.groups.tuning pairs them.
"""

from __future__ import annotations

from pathlib import Path

from repro.annex.groups.tuning import Tuning, tuning
from repro.config import Preset

GROUP = "decay_to_zero"
CLAIM = "beats the linear baseline under decay to zero"


def decay_to_zero(
    runs_dir: str | Path,
    preset: str | Preset,
    seeds: int = 1,
    config_dir: str | Path | None = None,
) -> Tuning:
    """Each setting at its last evaluation, each model's best, and the best two paired."""
    return tuning(runs_dir, preset, seeds, config_dir, group=GROUP, last=True)
