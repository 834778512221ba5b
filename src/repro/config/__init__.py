"""Run configuration: a preset (the scale) + an experiment (what is compared), as typed objects.

A run's identity is what training computes with; `runtime`, `report` and `resources` are not in
it. No torch here: the workflow imports this while it is parsed.
"""

from repro.config.experiments import (
    AdamW,
    Experiment,
    Experiments,
    PaperResult,
    parse_experiments,
)
from repro.config.preset import (
    ATTENTION_GATES,
    CORPORA,
    MAX_SEED,
    QUERY_MODES,
    ModelConfig,
    Preset,
    Report,
    Resources,
    Runtime,
    TrainSettings,
    folder_seed,
    is_preset_name,
    seed_dir,
)
from repro.config.run import (
    LOSS_MARGIN,
    RunConfig,
    config_dir,
    load_config,
    load_experiments,
    load_preset,
    load_run,
    resolve_run,
)
from repro.config.schema import ConfigError

__all__ = [
    "ATTENTION_GATES",
    "CORPORA",
    "LOSS_MARGIN",
    "MAX_SEED",
    "QUERY_MODES",
    "AdamW",
    "ConfigError",
    "Experiment",
    "Experiments",
    "ModelConfig",
    "PaperResult",
    "Preset",
    "Report",
    "Resources",
    "RunConfig",
    "Runtime",
    "TrainSettings",
    "config_dir",
    "folder_seed",
    "is_preset_name",
    "load_config",
    "load_experiments",
    "load_preset",
    "load_run",
    "parse_experiments",
    "resolve_run",
    "seed_dir",
]
