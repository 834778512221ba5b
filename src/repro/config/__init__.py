"""Run configuration: a preset (the scale) + an experiment (what is compared), as typed objects.

YAML data under config/, validated by repro/config/schemas on load; Preset and Experiment mirror
the YAML's sections. A run is resolved once (resolve_run, load_run) into a RunConfig holding every
final value: what training reads, and what the relations (run.py) are checked on. A run's
identity is derived from what training computes with (model, train and optimiser settings);
`runtime`, `report` and `resources` are not in it. No torch here: the workflow imports this while
it is parsed.
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
    "load_config",
    "load_experiments",
    "load_preset",
    "load_run",
    "parse_experiments",
    "resolve_run",
    "seed_dir",
]
