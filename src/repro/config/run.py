"""One run resolved: a preset's sections with an experiment's overrides and this machine's runtime
settings, every value final, and the identity that makes two runs the same run."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from repro.config.experiments import Experiment
from repro.config.model import ModelConfig
from repro.config.preset import Preset, Report, Runtime, TrainSettings
from repro.config.relations import check_relations, mlp_hidden
from repro.rundir.history import LATER_MODEL_OPTIONS, LATER_TRAIN_DEFAULTS, without_later_defaults

# The default loss ceiling: a nat above a uniform guess (an untrained GPT-2: ln(50304) = 10.83).
LOSS_MARGIN = 1.0


@dataclass(frozen=True)
class AdamW:
    """AdamW's settings in full (docs/specification.md §2): the experiment's learning-rate
    endpoints and weight decay, the preset's betas and epsilon."""

    lr_max: float
    lr_min: float
    weight_decay: float
    beta1: float
    beta2: float
    eps: float


@dataclass(frozen=True)
class RunConfig:
    """One training run, resolved: every value final, each in one place.

    The preset's sections with the experiment's `model:` and `train:` overrides, AdamW's settings
    (the experiment's rates and decay, the preset's constants), the runtime settings with this
    machine's overrides. Build it with resolve_run (or load_run) and change the runtime with
    with_runtime: both check the relations between the values (repro.config.relations) on exactly
    what training will use.
    """

    preset_name: str
    preset_file: str  # the YAML file the preset was read from (which checkout's config)
    corpus: str
    # The experiment as its file defines it (name, description, paper result): its model, train
    # and optimiser values are merged into the fields below, which are what training reads.
    experiment: Experiment
    model: ModelConfig
    train: TrainSettings
    optimizer: AdamW
    runtime: Runtime
    report: Report
    seed: int  # the seed k of train.init_seed and train.index_seed (Preset.with_seed)

    def __post_init__(self):
        check_relations(
            f"preset {self.preset_name}, experiment {self.experiment.name}",
            self.model,
            self.train,
            self.runtime,
            self.report,
        )

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch_size * self.model.block_size

    @property
    def loss_ceiling(self) -> float:
        """A higher train loss ends the run: train.loss_ceiling, else ln(vocab) + LOSS_MARGIN."""
        ceiling = self.train.loss_ceiling
        return math.log(self.model.vocab_size) + LOSS_MARGIN if ceiling is None else ceiling

    def with_runtime(self, **settings) -> "RunConfig":
        """This run with other runtime settings (command-line overrides: device, compile,
        train_micro_batch, loss_chunks, fused_projection); None keeps one. Never another run."""
        return replace(self, runtime=_overridden(self.runtime, settings))

    def identity(self) -> dict:
        """What makes two runs the same run: what the training computes with, nothing else.

        AdamW's constants stand under train, as run.json and checkpoints keep them; settings that
        older runs were recorded without are left out at those runs' values
        (repro.rundir.history)."""
        o = self.optimizer
        return {
            "model": without_later_defaults(asdict(self.model), LATER_MODEL_OPTIONS),
            "train": without_later_defaults(asdict(self.train), LATER_TRAIN_DEFAULTS)
            | {"beta1": o.beta1, "beta2": o.beta2, "adam_eps": o.eps},
            "optimizer": {
                "lr_max": o.lr_max,
                "lr_min": o.lr_min,
                "weight_decay": o.weight_decay,
            },
        }

    def to_dict(self) -> dict:
        """run.json's `config`: every value of the run, and where the preset came from."""
        return asdict(self)


def resolve_run(preset: Preset, experiment: Experiment, **runtime) -> RunConfig:
    """The run of `experiment` at `preset`, with runtime overrides (None keeps the preset's):
    the one place a run's values are assembled; the relations are checked on the result."""
    shape = asdict(preset.model) | experiment.model
    model = ModelConfig(
        **shape,
        mlp_hidden=mlp_hidden(experiment.name, shape["d_model"], experiment.mlp_ratio),
        query_mode=experiment.query_mode,
    )
    return RunConfig(
        preset_name=preset.name,
        preset_file=str(Path(preset.source).resolve()),
        corpus=preset.corpus,
        experiment=experiment,
        model=model,
        train=replace(preset.train, **experiment.schedule(preset.train.max_step)),
        optimizer=AdamW(**asdict(experiment.optimizer), **asdict(preset.adamw)),
        runtime=_overridden(preset.runtime, runtime),
        report=preset.report,
        seed=preset.seed,
    )


def _overridden(runtime: Runtime, settings: dict) -> Runtime:
    """`runtime` with the settings that are not None."""
    return replace(runtime, **{k: v for k, v in settings.items() if v is not None})
