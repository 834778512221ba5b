"""Run configuration: a preset (the scale) + an experiment (the query mode and hyperparameters).

Both are YAML data under config/, validated against the JSON schemas in repro/schemas on load.
An unknown key or a bad value is a one-line ConfigError naming the file and the key.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

from repro.model import ModelConfig


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message names the file and key."""


def default_config_dir() -> Path:
    """config/ of the source checkout this package runs from, else ./config (or $REPRO_CONFIG_DIR)."""
    if "REPRO_CONFIG_DIR" in os.environ:
        return Path(os.environ["REPRO_CONFIG_DIR"])
    checkout = Path(__file__).resolve().parents[2] / "config"
    return checkout if checkout.is_dir() else Path("config")


@cache
def _schema(name: str) -> dict:
    return yaml.safe_load(resources.files("repro").joinpath("schemas").joinpath(name).read_text())


def _fill_defaults(validator, properties, instance, schema):
    # The jsonschema FAQ's recipe: validate, and fill each missing property's default.
    for prop, subschema in properties.items():
        if isinstance(instance, dict) and "default" in subschema:
            instance.setdefault(prop, subschema["default"])
    yield from jsonschema.Draft202012Validator.VALIDATORS["properties"](
        validator, properties, instance, schema)


_DefaultFillingValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"properties": _fill_defaults})


def validate(data, schema_name: str, source: str | os.PathLike) -> dict:
    """Validate `data` (filling defaults in place); raise a one-line ConfigError naming source and key."""
    error = jsonschema.exceptions.best_match(
        _DefaultFillingValidator(_schema(schema_name)).iter_errors(data))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        if error.validator == "additionalProperties":
            unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            message = f"unknown key {', '.join(map(repr, unknown))}"
        else:
            message = error.message
        raise ConfigError(f"{source}: {where}: {message}")
    return data


def read_yaml(path: Path) -> dict:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {str(e).splitlines()[0]}") from None
    return {} if data is None else data


@dataclass(frozen=True)
class TrainSettings:
    max_step: int
    batch_size: int
    micro_batch: int
    warmup_steps: int
    decay_steps: int
    eval_interval: int
    eval_sequences: int
    eval_rows: int
    table_step: int
    checkpoint_interval: int
    grad_clip: float
    beta1: float
    beta2: float
    adam_eps: float
    loss_ceiling: float | None
    init_seed: int
    index_seed: int

    @property
    def accumulation(self) -> int:
        return self.batch_size // self.micro_batch

    @property
    def eval_batches(self) -> int:
        return self.eval_sequences // self.micro_batch


@dataclass(frozen=True)
class Preset:
    name: str
    source: str
    corpus: str
    n_layer: int
    n_head: int
    d_model: int
    block_size: int
    vocab_size: int
    train: TrainSettings
    device: str
    compile: str | bool
    train_micro_batch: int  # sequences per training forward pass: speed only, the update is the same
    log_interval: int
    description: str = ""

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch_size * self.block_size

    @property
    def train_accumulation(self) -> int:
        """Micro-batches per optimiser step at this machine's train_micro_batch."""
        return self.train.batch_size // self.train_micro_batch

    def with_micro_batch(self, micro_batch: int) -> "Preset":
        """This preset with another training micro-batch (`repro train --micro-batch`, `repro bench`)."""
        _check_divides(f"preset {self.name}", "micro_batch", micro_batch, "train.batch_size", self.train.batch_size)
        return replace(self, train_micro_batch=micro_batch)


def _check_divides(source, key: str, value: int, other_key: str, other: int) -> None:
    if other % value:
        raise ConfigError(f"{source}: {key}: {value} does not divide {other_key} = {other}")


def _preset_path(name_or_path: str, config_dir: Path) -> Path:
    if name_or_path.endswith((".yaml", ".yml")) or os.sep in name_or_path:
        return Path(name_or_path)
    path = config_dir / "presets" / f"{name_or_path}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in (config_dir / "presets").glob("*.yaml"))
        raise ConfigError(f"unknown preset {name_or_path!r} (no {path}; known: {', '.join(known)})")
    return path


def load_preset(name_or_path: str, config_dir: Path | None = None) -> Preset:
    """Load a preset by name (config/presets/NAME.yaml) or by path to a YAML file."""
    path = _preset_path(name_or_path, config_dir or default_config_dir())
    data = validate(read_yaml(path), "preset.schema.yaml", path)
    train = TrainSettings(**data["train"])
    for field in ("batch_size", "eval_sequences"):
        _check_divides(path, "train.micro_batch", train.micro_batch, f"train.{field}", getattr(train, field))
    _check_divides(path, "model.n_head", data["model"]["n_head"], "model.d_model", data["model"]["d_model"])
    runtime = data.get("runtime", {})
    micro_batch = runtime["micro_batch"] or train.micro_batch
    _check_divides(path, "runtime.micro_batch", micro_batch, "train.batch_size", train.batch_size)
    return Preset(name=path.stem, source=str(path), corpus=data["corpus"], train=train,
                  device=runtime["device"], compile=runtime["compile"], train_micro_batch=micro_batch,
                  log_interval=runtime["log_interval"], description=data.get("description", ""),
                  **data["model"])


@dataclass(frozen=True)
class Experiment:
    name: str
    query_mode: str
    mlp_ratio: float
    lr_max: float
    lr_min: float
    weight_decay: float
    description: str = ""
    paper_val_loss: float | None = None
    paper_rel_improvement: float | None = None


@dataclass(frozen=True)
class Experiments:
    """Every experiment of config/experiments.yaml, and its named groups (table1, figure2, ...)."""
    source: str
    by_name: dict[str, Experiment]
    groups: dict[str, list[str]]

    def __getitem__(self, name: str) -> Experiment:
        try:
            return self.by_name[name]
        except KeyError:
            raise ConfigError(f"{self.source}: unknown experiment {name!r} "
                              f"(known: {', '.join(sorted(self.by_name))})") from None

    def group(self, name: str) -> list[Experiment]:
        if name not in self.groups:
            raise ConfigError(f"{self.source}: groups: unknown group {name!r} "
                              f"(known: {', '.join(sorted(self.groups))})")
        return [self[n] for n in self.groups[name]]


def load_experiments(path: Path | None = None) -> Experiments:
    path = Path(path) if path else default_config_dir() / "experiments.yaml"
    data = validate(read_yaml(path), "experiments.schema.yaml", path)
    by_name = {}
    for name, fields in data["experiments"].items():
        paper = fields.pop("paper", {})
        by_name[name] = Experiment(name=name, paper_val_loss=paper.get("val_loss"),
                                   paper_rel_improvement=paper.get("rel_improvement"), **fields)
    experiments = Experiments(source=str(path), by_name=by_name, groups=data["groups"])
    for group, names in data["groups"].items():
        for name in names:
            if name not in by_name:
                raise ConfigError(f"{path}: groups.{group}: unknown experiment {name!r}")
    return experiments


@dataclass(frozen=True)
class RunConfig:
    """One training run: a preset (scale) and an experiment (what is compared)."""
    preset: Preset
    experiment: Experiment

    def model_config(self) -> ModelConfig:
        p = self.preset
        return ModelConfig(n_layer=p.n_layer, n_head=p.n_head, d_model=p.d_model,
                           block_size=p.block_size, vocab_size=p.vocab_size,
                           mlp_hidden=int(p.d_model * self.experiment.mlp_ratio),
                           query_mode=self.experiment.query_mode)

    def to_dict(self) -> dict:
        return {"preset": asdict(self.preset), "experiment": asdict(self.experiment),
                "model": asdict(self.model_config())}


def load_run_config(preset: str, experiment: str, experiments_file: Path | None = None,
                    config_dir: Path | None = None) -> RunConfig:
    return RunConfig(load_preset(preset, config_dir), load_experiments(experiments_file)[experiment])
