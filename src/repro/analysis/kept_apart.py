"""One preset's tables and figures never replaced by another's.

The workflow writes the configured preset's products to results/ (results/table1.csv, the
figures, ...). Before a run at another preset replaces them, they move to results/<preset>/,
relative paths kept: each notebook's executed copy (results/notebooks/NAME.ipynb) names the
preset it ran at (papermill's parameters), and its rule's other products go with it. Notebooks
run by hand write to results/<preset>/ themselves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RESULTS = Path("results")


def preset_of(notebook: Path) -> str | None:
    """The preset an executed notebook ran at; None where it cannot be read or names none."""
    try:
        parameters = json.loads(notebook.read_text())["metadata"]["papermill"]["parameters"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    preset = parameters.get("preset") if isinstance(parameters, dict) else None
    return preset if isinstance(preset, str) and preset and "/" not in preset else None


def keep_apart(products: dict[str, list[str]], preset: str, results: Path = RESULTS) -> list[str]:
    """Move each group of `products` (executed notebook -> every file its rule writes, under
    `results`) whose notebook ran at a preset other than `preset` to results/<that preset>/;
    one line per preset moved, for the user."""
    moved: dict[str, list[str]] = {}
    for notebook, files in products.items():
        earlier = preset_of(Path(notebook))
        if earlier is None or earlier == preset:
            continue
        for name in files:
            _move(Path(name), results / earlier / Path(name).relative_to(results))
        moved.setdefault(earlier, []).append(Path(notebook).stem)
    return [
        f"{results}/: preset {earlier}'s {', '.join(names)} moved to {results / earlier}/ "
        f"(this run is preset {preset}'s)"
        for earlier, names in moved.items()
    ]


def _move(source: Path, target: Path) -> None:
    if source.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)  # a same-named file there: that preset's earlier copy
