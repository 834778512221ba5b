"""One run resolved: a preset's sections with an experiment's overrides and this machine's runtime
settings, every value final, and the identity that makes two runs the same run."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from repro.config.experiments import AdamW, Experiment
from repro.config.model import ModelConfig
from repro.config.preset import Preset, Report, Runtime, TrainSettings
from repro.config.relations import check_micro_batch, check_relations, mlp_hidden

# The default loss ceiling: a nat above a uniform guess (an untrained GPT-2: ln(50304) = 10.83).
LOSS_MARGIN = 1.0


@dataclass(frozen=True)
class RunConfig:
    """One training run, resolved: every value final, each in one place: the preset's sections
    with the experiment's overrides and AdamW settings, the runtime with this machine's overrides.
    Build it with resolve_run (or load_run); change the runtime with with_runtime."""

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
        run = replace(self, runtime=_overridden(self.runtime, settings))
        check_micro_batch(run.source, run.runtime, run.train)
        return run

    @property
    def source(self) -> str:
        """How errors name the run."""
        return f"preset {self.preset_name}, experiment {self.experiment.name}"

    def identity(self) -> dict:
        """What makes two runs the same run: what the training computes with, nothing else."""
        return {
            "model": asdict(self.model),
            "train": asdict(self.train),
            "optimizer": asdict(self.optimizer),
        }

    def to_dict(self) -> dict:
        """run.json's `config`: every value of the run, and where the preset came from."""
        return asdict(self)


def resolve_run(preset: Preset, experiment: Experiment, **runtime) -> RunConfig:
    """The run of `experiment` at `preset`, with runtime overrides (None keeps the preset's):
    the one place a run's values are assembled; the relations are checked on the result."""
    model = replace(preset.model, **experiment.model, query_mode=experiment.query_mode)
    model = replace(
        model, mlp_hidden=mlp_hidden(experiment.name, model.d_model, experiment.mlp_ratio)
    )
    run = RunConfig(
        preset_name=preset.name,
        preset_file=str(Path(preset.source).resolve()),
        corpus=preset.corpus,
        experiment=experiment,
        model=model,
        train=replace(preset.train, **experiment.schedule(preset.train.max_step)),
        optimizer=experiment.optimizer,
        runtime=_overridden(preset.runtime, runtime),
        report=preset.report,
        seed=preset.seed,
    )
    check_relations(run.source, run.train, run.runtime, run.report)
    return run


def _overridden(runtime: Runtime, settings: dict) -> Runtime:
    """`runtime` with the settings that are not None."""
    return replace(runtime, **{k: v for k, v in settings.items() if v is not None})
