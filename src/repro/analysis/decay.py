"""Decay to zero (docs/decay_to_zero.md): does the nonlinear query's gain survive the linear
baseline's best schedule?

An audit of the authors' code trained the linear baseline at the paper's scale with the learning
rate decaying to zero after the warm-up, at weight decay 0.1: its best peak rate, 4.8e-3, ends
level with the paper's nonlinear query, and about 0.02 nats of its drop comes in the last
thousand steps. Its configurations ask for a linear decay, but its scripts ran nanoGPT's cosine
to zero. Group `decay_to_zero` of the experiments file trains, on both schedules (a linear decay,
`train.schedule: linear`, and the cosine to lr_min 0), the linear baseline at that rate and a
neighbour and the nonlinear query at its own best rate and a higher one; each model's best is
chosen over both. A run that decays to zero is read where its decay
ends, at its last evaluation, not at the preset's table step; each model is represented by its
best rate and the two bests are paired seed by seed, as the tuning comparison pairs them
(repro.analysis.tuning).
"""

from __future__ import annotations

from pathlib import Path

from repro.analysis.tuning import Tuning, tuning
from repro.config import Preset

GROUP = "decay_to_zero"
CLAIM = "beats the linear baseline under decay to zero"


def decay_to_zero(
    runs_dir: str | Path,
    preset: str | Preset,
    seeds: int = 1,
    config_dir: str | Path | None = None,
) -> Tuning:
    """Each setting of the group at its last evaluation over seeds 0..seeds-1, each model's best,
    and the best nonlinear setting paired with the best linear one (repro.analysis.tuning)."""
    return tuning(runs_dir, preset, seeds, config_dir, group=GROUP, last=True)
