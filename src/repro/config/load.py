"""Reading presets and experiments from a config directory, and resolving a run from them."""

from __future__ import annotations

import os
from pathlib import Path

from repro.config.experiments import Experiments, parse_experiments
from repro.config.model import ModelConfig
from repro.config.preset import Preset, Report, Resources, Runtime, TrainSettings
from repro.config.relations import check_experiment, check_relations
from repro.config.run import RunConfig, resolve_run
from repro.config.schema import ConfigError, load


def config_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Where presets and experiments are read from: `explicit`, else $REPRO_CONFIG_DIR, else the
    working directory's config/ when it has one, else the config/ of the checkout installed."""
    if explicit is not None:
        return Path(explicit)
    if "REPRO_CONFIG_DIR" in os.environ:
        return Path(os.environ["REPRO_CONFIG_DIR"])
    if Path("config", "presets").is_dir():
        return Path("config")
    return Path(__file__).resolve().parents[3] / "config"  # src/repro/config/load.py


def _preset_path(name_or_path: str, directory: Path) -> Path:
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        return Path(name_or_path)
    path = directory / "presets" / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (directory / "presets").glob("*.yaml"))
        raise ConfigError(f"unknown preset {name_or_path!r} (no {path}; known: {', '.join(known)})")
    return path


def load_preset(name_or_path: str, directory: str | os.PathLike | None = None) -> Preset:
    """A preset by name (<config dir>/presets/NAME.yaml) or by path to a YAML file."""
    path = _preset_path(name_or_path, config_dir(directory))
    data = load(path, "preset.schema.yaml")
    preset = Preset(
        name=path.stem,
        source=str(path),
        corpus=data["corpus"],
        model=ModelConfig(**data["model"]),
        train=TrainSettings(**data["train"]),
        runtime=Runtime(**data["runtime"]),
        report=Report(**data["report"]),
        resources=Resources(**data["resources"]),
        description=data.get("description", ""),
    )
    check_relations(path, preset.train, preset.runtime, preset.report)
    return preset


def load_experiments(
    path: str | os.PathLike | None = None, directory: str | os.PathLike | None = None
) -> Experiments:
    """The experiments file: `path`, else <config dir>/experiments.yaml."""
    path = Path(path) if path else config_dir(directory) / "experiments.yaml"
    experiments = parse_experiments(load(path, "experiments.schema.yaml"), path)
    for experiment in experiments.by_name.values():
        check_experiment(path, experiment.name, experiment.optimizer)
    return experiments


def load_run(
    preset: str,
    experiment: str,
    experiments_file: str | os.PathLike | None = None,
    directory: str | os.PathLike | None = None,
    seed: int = 0,
    **runtime,
) -> RunConfig:
    """The run of an experiment at a preset (name or YAML path), seed k, runtime overrides."""
    experiments = load_experiments(experiments_file, directory)
    return resolve_run(
        load_preset(preset, directory).with_seed(seed), experiments[experiment], **runtime
    )


def load_config(
    preset: str | Preset, directory: str | os.PathLike | None = None
) -> tuple[Preset, Experiments]:
    """The preset (a name, a YAML path or a Preset) and the experiments of a config directory."""
    if not isinstance(preset, Preset):
        preset = load_preset(preset, directory)
    return preset, load_experiments(directory=directory)
