"""One run resolved: a preset's sections with an experiment's overrides and this machine's runtime
settings, every value final, and the identity that makes two runs the same run; the presets and
experiments it is read from (load_run), and the relations checked on it."""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from repro.config.experiments import AdamW, Experiment, Experiments, parse_experiments
from repro.config.preset import ModelConfig, Preset, Report, Resources, Runtime, TrainSettings
from repro.config.schema import ConfigError, load

# The default loss ceiling: a nat above a uniform guess (an untrained GPT-2: ln(50304) = 10.83).
LOSS_MARGIN = 1.0


@dataclass(frozen=True)
class RunConfig:
    """One training run, every value final; build it with resolve_run (or load_run)."""

    preset_name: str
    preset_file: str  # the YAML file the preset was read from (which checkout's config)
    corpus: str
    # As its file defines it; training reads the merged fields below.
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
        """This run with other runtime settings (None keeps one); never another run."""
        run = replace(self, runtime=_overridden(self.runtime, settings))
        check_runtime(run.source, run.runtime, run.train)
        return run

    @property
    def source(self) -> str:
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
    """The run of `experiment` at `preset`: the one place its values are assembled and checked."""
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
    return replace(runtime, **{k: v for k, v in settings.items() if v is not None})


def config_dir(explicit: str | os.PathLike | None = None) -> Path:
    """`explicit`, else $REPRO_CONFIG_DIR, else ./config when it exists, else the checkout's."""
    if explicit is not None:
        return Path(explicit)
    if "REPRO_CONFIG_DIR" in os.environ:
        return Path(os.environ["REPRO_CONFIG_DIR"])
    if Path("config", "presets").is_dir():
        return Path("config")
    return Path(__file__).resolve().parents[3] / "config"  # src/repro/config/run.py


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


# The relations the JSON schemas cannot express: each value valid alone, the run could still break
# hours in (a warm-up as long as the decay divides by zero); checked before anything is computed.


def check_divides(source, key: str, value: int, other_key: str, other: int) -> None:
    if value < 1 or other % value:
        raise ConfigError(f"{source}: {key}: {value} does not divide {other_key} = {other}")


def check_relations(source, train, runtime, report) -> None:
    """The relations between the values of a preset's sections, or of a RunConfig's."""
    t = train
    for key in ("batch_size", "eval_sequences"):
        check_divides(
            source, "train.eval_micro_batch", t.eval_micro_batch, f"train.{key}", getattr(t, key)
        )
    check_runtime(source, runtime, t)
    if t.warmup_steps >= t.decay_steps:
        raise ConfigError(
            f"{source}: train.warmup_steps: {t.warmup_steps} must be less than "
            f"train.decay_steps = {t.decay_steps}"
        )
    step = report.table_step
    if step > t.max_step or step % t.eval_interval:
        raise ConfigError(
            f"{source}: report.table_step: {step} is not an evaluation step "
            f"(a multiple of train.eval_interval = {t.eval_interval} up to "
            f"train.max_step = {t.max_step})"
        )
    if t.eval_rows < t.evaluations:
        raise ConfigError(
            f"{source}: train.eval_rows: {t.eval_rows} rows, the run evaluates "
            f"{t.evaluations} times (train.max_step // train.eval_interval + 1)"
        )


# The levers runtime.deterministic refuses, with why each cannot be deterministic. The others can:
# under torch.use_deterministic_algorithms flash and efficient attention take a deterministic
# backward pass (FlashAttention-2's own deterministic one; the memory-efficient kernel's with its
# keys unsplit) and SDPA's `auto` passes cuDNN over; the fused loss, the loss chunks and the fused
# projection are matmuls and sums in a fixed order; reduce-overhead replays as CUDA graphs the
# kernels the default mode compiles.
NOT_DETERMINISTIC = {
    # cuDNN's attention has no deterministic backward: torch's SDPA will not run it then.
    ("attention", "cudnn"): "torch runs no cuDNN attention under deterministic algorithms",
    # Inductor times candidate kernels for each matmul and keeps the fastest: timings vary, and
    # so do the kernels, and with them the rounding, from one run to the next.
    ("compile_mode", "max-autotune-no-cudagraphs"): "inductor keeps whichever matmul kernel "
    "timed fastest, which differs from run to run",
}


def check_runtime(source, runtime, train) -> None:
    """The runtime relations: a training micro-batch that is a number divides the batch, and a
    deterministic run uses no lever that cannot be deterministic."""
    micro_batch = runtime.train_micro_batch
    if isinstance(micro_batch, int):
        check_divides(
            source, "runtime.train_micro_batch", micro_batch, "train.batch_size", train.batch_size
        )
    for (key, value), why in NOT_DETERMINISTIC.items():
        if runtime.deterministic and getattr(runtime, key) == value:
            raise ConfigError(
                f"{source}: runtime.{key}: {value} cannot be deterministic ({why}), and "
                f"runtime.deterministic is true"
            )


def check_experiment(source, name: str, optimizer) -> None:
    """The relations between an experiment's values (repro.config.AdamW)."""
    if optimizer.lr_min > optimizer.lr_max:
        raise ConfigError(
            f"{source}: experiments.{name}.lr_min: {optimizer.lr_min} is more than "
            f"lr_max = {optimizer.lr_max}"
        )


def mlp_hidden(experiment: str, d_model: int, ratio: float) -> int:
    """The MLP's hidden size, int(d_model * mlp_ratio) (the authors' rounding), at least 1."""
    hidden = int(d_model * ratio)
    if hidden < 1:
        raise ConfigError(
            f"experiment {experiment}: mlp_ratio: {ratio} x d_model {d_model} gives an MLP of "
            f"{hidden} units"
        )
    return hidden
