"""The experiments file as typed objects: what each experiment changes, its groups and roles.

No torch here: the workflow imports this while parsing.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from repro.config.schema import ConfigError


@dataclass(frozen=True)
class AdamW:
    """An experiment's AdamW settings (§2); the betas and epsilon are the preset's."""

    lr_max: float
    lr_min: float
    weight_decay: float


@dataclass(frozen=True)
class PaperResult:
    """What the paper reports for an experiment at step 59,000 (docs/specification.md §3)."""

    val_loss: float
    rel_improvement: float


@dataclass(frozen=True)
class Experiment:
    name: str
    query_mode: str
    mlp_ratio: float
    optimizer: AdamW
    description: str = ""
    paper: PaperResult | None = None
    source: str | None = None  # the authors' config, e.g. "tied/original" (§8.3)
    model: dict = field(default_factory=dict)  # overrides of the preset's model section
    train: dict = field(default_factory=dict)  # overrides of the preset's train section

    def schedule(self, preset_max_step: int) -> dict:
        """The `train:` overrides for a preset of `preset_max_step`: as written, or, with a
        reference_max_step, max_step and decay_steps scaled by preset_max_step / reference (the
        authors' untied 105,001 steps decaying to 600,000: 21 decaying to 120 at 12 steps)."""
        overrides = dict(self.train)
        reference = overrides.pop("reference_max_step", None)
        if reference is None:
            return overrides
        return overrides | {
            key: (overrides[key] * preset_max_step + reference // 2) // reference
            for key in ("max_step", "decay_steps")
            if key in overrides
        }


@dataclass(frozen=True)
class Experiments:
    """Every experiment of the experiments file, its groups, the baseline and the claims' roles."""

    source: str
    by_name: dict[str, Experiment]
    groups: dict[str, list[str]]
    baseline: str
    claims: dict[str, str]

    def __getitem__(self, name: str) -> Experiment:
        try:
            return self.by_name[name]
        except KeyError:
            # A hundred names hide the one meant: the closest, and where the others are.
            closest = difflib.get_close_matches(name, self.by_name, n=3)
            hint = f"; did you mean {', '.join(closest)}?" if closest else ""
            raise ConfigError(
                f"{self.source}: unknown experiment {name!r}{hint} "
                f"({len(self.by_name)} experiments in {self.source})"
            ) from None

    def group(self, name: str) -> list[Experiment]:
        if name not in self.groups:
            raise ConfigError(
                f"{self.source}: groups: unknown group {name!r} "
                f"(known: {', '.join(sorted(self.groups))})"
            )
        return [self[n] for n in self.groups[name]]

    def by_source(self, source: str) -> Experiment | None:
        """The experiment made from the authors' config `source` (e.g. "tied/original")."""
        return next((e for e in self.by_name.values() if e.source == source), None)


def parse_experiments(data: dict, path: Path) -> Experiments:
    """The validated YAML of an experiments file -> Experiments; unknown names are refused."""
    by_name = {}
    for name, e in data["experiments"].items():
        paper = PaperResult(**e["paper"]) if "paper" in e else None
        by_name[name] = Experiment(
            name=name,
            query_mode=e["query_mode"],
            mlp_ratio=e["mlp_ratio"],
            paper=paper,
            optimizer=AdamW(e["lr_max"], e["lr_min"], e["weight_decay"]),
            description=e.get("description", ""),
            source=e.get("source"),
            model=e.get("model", {}),
            train=e.get("train", {}),
        )
    named = [(f"groups.{g}", n) for g, names in data["groups"].items() for n in names]
    named += [("baseline", data["baseline"])]
    named += [(f"claims.{role}", name) for role, name in data["claims"].items()]
    for where, name in named:
        if name not in by_name:
            raise ConfigError(f"{path}: {where}: unknown experiment {name!r}")
    sources = [e.source for e in by_name.values() if e.source]
    if len(sources) != len(set(sources)):
        twice = sorted({s for s in sources if sources.count(s) > 1})
        raise ConfigError(f"{path}: source {twice[0]!r} is named by two experiments")
    return Experiments(
        source=str(path),
        by_name=by_name,
        groups=data["groups"],
        baseline=data["baseline"],
        claims=data["claims"],
    )
