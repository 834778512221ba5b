"""The authors' output folders: which of their configs (§8.3) a downloaded run folder holds, and
the experiment of ours that each one is. No torch here: the workflow may read it while parsing.
"""

from __future__ import annotations

from pathlib import Path

from repro.config import Experiments
from repro.config.schema import ConfigError

# The authors' train.py writes config_<tiedw|untiedw>_NAME.py's run into out_config_..._NAME/.
FOLDER_PREFIXES = {"out_config_tiedw_": "tied/", "out_config_untiedw_": "untied/"}


def source_of(folder: str | Path) -> str | None:
    """The authors' config an output folder of theirs comes from ("tied/NAME"), or None."""
    name = Path(folder).name
    for prefix, kind in FOLDER_PREFIXES.items():
        if name.startswith(prefix):
            return kind + name[len(prefix) :]
    return None


def authors_folders(artefacts: str | Path) -> list[Path]:
    """The run folders (out_config_*) of a downloaded artefacts folder, sorted."""
    if not Path(artefacts).is_dir():
        raise ConfigError(f"authors_artefacts: {artefacts}: not a folder")
    return sorted(p for p in Path(artefacts).iterdir() if p.is_dir() and source_of(p))


def authors_runs(artefacts: str | Path, experiments: Experiments) -> dict[str, dict]:
    """Experiment -> {"folder", "checkpoint"} for each downloaded run folder an experiment names."""
    found = {}
    for folder in authors_folders(artefacts):
        experiment = experiments.by_source(source_of(folder))
        if experiment is not None:
            found[experiment.name] = {
                "folder": str(folder),
                "checkpoint": (folder / "ckpt.pt").is_file(),
            }
    return found
