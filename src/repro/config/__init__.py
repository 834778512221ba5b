"""Run configuration: a preset (the scale) + an experiment (what is compared), as typed objects.

YAML data under config/, validated by repro/config/schemas on load; Preset and Experiment mirror
the YAML's sections. A run is resolved once (resolve_run, load_run) into a RunConfig holding every
final value: what training reads, and what the relations (relations.py) are checked on. A run's
identity is derived from what training computes with (model, train and optimiser settings);
`runtime`, `report` and `resources` are not in it. No torch here: the workflow imports this while
it is parsed.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from repro.config.experiments import (  # noqa: F401 (re-exported: the experiments' side of a run)
    Experiment,
    Experiments,
    OptimizerSettings,
    PaperResult,
    parse_experiments,
)
from repro.config.relations import check_divides, check_experiment, check_relations, mlp_hidden
from repro.config.schema import ConfigError, load

QUERY_MODES = (
    "linear",
    "identity",
    "residual_gelu",
    "residual_linear",
    "residual_bottleneck_linear",
)
# The modes whose query goes through the bottleneck MLP of eq. (3) (repro.model.QueryMLP).
QUERY_MLP_MODES = ("residual_gelu", "residual_bottleneck_linear")
# Model options and train settings added after runs had been recorded, at their defaults. A run's
# identity leaves a setting out while it has this value, so that runs recorded before it existed
# keep theirs (they resume, and the results do not call them stale).
LATER_MODEL_OPTIONS = {"qk_norm": False}
LATER_TRAIN_DEFAULTS = {
    "schedule": "cosine",
    "divergence_margin": None,
    "divergence_evaluations": 2,
}
CORPORA = ("openwebtext", "python-docs")
# The default loss ceiling: a nat above a uniform guess (an untrained GPT-2: ln(50304) = 10.83).
LOSS_MARGIN = 1.0
SCHEDULES = ("cosine", "linear")
# Seeds, shifted by --seed, stay in the range every generator takes (the schema's maximum).
MAX_SEED = 2**32 - 1


def _without_later_defaults(values: dict, later: dict) -> dict:
    """`values` less the settings of `later` that still have their default there."""
    return {k: v for k, v in values.items() if k not in later or v != later[k]}


def config_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Where presets and experiments are read from: `explicit`, else $REPRO_CONFIG_DIR, else the
    working directory's config/ when it has one, else the config/ of the checkout installed."""
    if explicit is not None:
        return Path(explicit)
    if "REPRO_CONFIG_DIR" in os.environ:
        return Path(os.environ["REPRO_CONFIG_DIR"])
    if Path("config", "presets").is_dir():
        return Path("config")
    return Path(__file__).resolve().parents[3] / "config"  # src/repro/config/__init__.py


@dataclass(frozen=True)
class ModelConfig:
    """Everything the model's shape and function depend on (docs/specification.md §1)."""

    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    block_size: int = 1024
    vocab_size: int = 50304
    mlp_hidden: int = 3072
    query_mode: str = "linear"
    tie_embeddings: bool = True  # the paper ties; the authors' predecessor runs also untied
    # q is multiplied by query_scale before the usual 1/sqrt(head_size) attention scale.
    # None means the mode's own: 1/2 for the residual modes (eq. 2: q = (x + f(x)) / 2), else 1.
    query_scale: float | None = None
    # RMSNorm of each head's queries and keys before attention (an ablation; the paper has none).
    qk_norm: bool = False

    def __post_init__(self):
        if self.query_mode not in QUERY_MODES:
            raise ConfigError(
                f"query_mode {self.query_mode!r} is not one of {', '.join(QUERY_MODES)}"
            )
        check_divides("model", "n_head", self.n_head, "d_model", self.d_model)

    @property
    def head_size(self) -> int:
        return self.d_model // self.n_head

    @property
    def query_hidden(self) -> int:
        return self.d_model // 2  # r = d/2 (eq. 3)

    @property
    def resolved_query_scale(self) -> float:
        if self.query_scale is not None:
            return self.query_scale
        return 0.5 if self.query_mode.startswith("residual") else 1.0

    @property
    def has_linear_query(self) -> bool:
        return self.query_mode in ("linear", "residual_linear")


@dataclass(frozen=True)
class ModelShape:
    """A preset's `model` section: the sizes every experiment at that scale shares."""

    n_layer: int
    n_head: int
    d_model: int
    block_size: int
    vocab_size: int


@dataclass(frozen=True)
class TrainSettings:
    """A preset's `train` section (AdamW's constants aside): steps, batch, schedule, evaluation,
    seeds."""

    max_step: int
    batch_size: int  # sequences per optimiser step
    warmup_steps: int
    decay_steps: int
    eval_interval: int
    eval_sequences: int  # per evaluation and split
    eval_micro_batch: int  # sequences per evaluation forward pass (the paper's micro-batch, 12)
    eval_rows: int
    grad_clip: float
    loss_ceiling: float | None
    init_seed: int
    index_seed: int
    schedule: str = "cosine"  # after the warm-up: cosine to lr_min, or linear to zero
    # The divergence stop: this many consecutive evaluations more than the margin (nats) above
    # the best validation loss end a run (a None margin: never).
    divergence_margin: float | None = None
    divergence_evaluations: int = 2

    @property
    def eval_batches(self) -> int:
        return self.eval_sequences // self.eval_micro_batch

    @property
    def evaluations(self) -> int:
        """How many times a run evaluates: at steps 0, eval_interval, ... up to max_step."""
        return self.max_step // self.eval_interval + 1


@dataclass(frozen=True)
class AdamWConstants:
    """A preset's AdamW constants (its `train` section's beta1, beta2, adam_eps): the same for every
    experiment at that scale."""

    beta1: float
    beta2: float
    eps: float


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
class Runtime:
    """A preset's `runtime` section: how this machine runs, never what is computed."""

    device: str
    compile: str | bool  # auto: on CUDA only
    train_micro_batch: int | str | None  # per training forward pass; None = eval_micro_batch
    log_interval: int
    checkpoint_interval: int
    loss_chunks: int
    fused_projection: str | bool = "auto"  # residual_gelu's fused K, V, W1 matmul; auto: on CUDA

    def enabled(self, switch: str, device_type: str) -> bool:
        """A switch of this section (compile, fused_projection) on a device: auto = on CUDA."""
        setting = getattr(self, switch)
        return setting is True or (setting == "auto" and device_type == "cuda")


@dataclass(frozen=True)
class Report:
    """A preset's `report` section: what the tables read from the runs."""

    table_step: int


@dataclass(frozen=True)
class Resources:
    """A preset's `resources` section: what one training job asks a cluster scheduler for."""

    mem_mb: int
    runtime: int  # minutes


@dataclass(frozen=True)
class Preset:
    """A preset file as typed objects: the scale every experiment of a comparison shares."""

    name: str
    source: str
    corpus: str
    model: ModelShape
    train: TrainSettings
    adamw: AdamWConstants
    runtime: Runtime
    report: Report
    resources: Resources
    description: str = ""
    seed: int = 0  # train's seeds are this seed's (with_seed); 0: the YAML's, the paper's

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch_size * self.model.block_size

    def with_seed(self, seed: int) -> "Preset":
        """This preset at seed k: indices drawn with index_seed + k, the model initialised with
        init_seed + k (seed 0: the YAML's, the paper's 42 and 1337). The one place seeds derive."""
        if not 0 <= seed <= MAX_SEED:
            raise ConfigError(f"seed {seed}: seeds are 0, 1, 2, ... up to {MAX_SEED}")
        t, shift = self.train, seed - self.seed
        return replace(
            self,
            seed=seed,
            train=replace(t, init_seed=t.init_seed + shift, index_seed=t.index_seed + shift),
        )


def seed_dir(base: str | os.PathLike, seed: int | str) -> str:
    """Where seed k's runs (or indices) of a preset are: `base` for seed 0, base/seed<k> else."""
    return str(base) if str(seed) == "0" else os.path.join(base, f"seed{seed}")


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
    train = data["train"]
    adamw = AdamWConstants(train.pop("beta1"), train.pop("beta2"), train.pop("adam_eps"))
    preset = Preset(
        name=path.stem,
        source=str(path),
        corpus=data["corpus"],
        model=ModelShape(**data["model"]),
        train=TrainSettings(**train),
        adamw=adamw,
        runtime=Runtime(**data["runtime"]),
        report=Report(**data["report"]),
        resources=Resources(**data["resources"]),
        description=data.get("description", ""),
    )
    check_relations(path, preset.model, preset.train, preset.runtime, preset.report)
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
    def resolved_train_micro_batch(self) -> int:
        """runtime.train_micro_batch as a number: None, and `auto` until a GPU resolves it
        (repro.train), are the evaluation's micro-batch."""
        chosen = self.runtime.train_micro_batch
        return chosen if isinstance(chosen, int) else self.train.eval_micro_batch

    @property
    def accumulation(self) -> int:
        """Micro-batches per optimiser step at this machine's training micro-batch."""
        return self.train.batch_size // self.resolved_train_micro_batch

    @property
    def loss_ceiling(self) -> float:
        """A higher train loss ends the run: train.loss_ceiling, else ln(vocab) + LOSS_MARGIN."""
        ceiling = self.train.loss_ceiling
        return math.log(self.model.vocab_size) + LOSS_MARGIN if ceiling is None else ceiling

    def with_runtime(self, **settings) -> "RunConfig":
        """This run with other runtime settings (command-line overrides: device, compile,
        train_micro_batch, loss_chunks, fused_projection); None keeps one. Never another run."""
        changed = {k: v for k, v in settings.items() if v is not None}
        return replace(self, runtime=replace(self.runtime, **changed))

    def identity(self) -> dict:
        """What makes two runs the same run: what the training computes with, nothing else.

        In the layout run.json and checkpoints have always had (AdamW's constants under train)."""
        o = self.optimizer
        return {
            "model": _without_later_defaults(asdict(self.model), LATER_MODEL_OPTIONS),
            "train": _without_later_defaults(asdict(self.train), LATER_TRAIN_DEFAULTS)
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
        runtime=preset.runtime,
        report=preset.report,
        seed=preset.seed,
    ).with_runtime(**runtime)


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
