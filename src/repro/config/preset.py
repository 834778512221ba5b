"""A preset: the scale every experiment of a comparison shares, its YAML sections typed, and the
model's configuration (docs/specification.md §1), of which a preset holds the shared sizes."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace

from repro.config.schema import ConfigError
from repro.sizes import ModelSizes

CORPORA = ("openwebtext", "python-docs")
# Seeds, shifted by --seed, stay in the range every generator takes (the schema's maximum).
MAX_SEED = 2**32 - 1

QUERY_MODES = (
    "linear",
    "identity",
    "residual_gelu",
    "residual_linear",
    "residual_bottleneck_linear",
)
ATTENTION_GATES = (None, "headwise", "elementwise")


@dataclass(frozen=True)
class ModelConfig(ModelSizes):
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
    # A sigmoid gate on each head's attention output (an ablation: Qiu et al. 2025).
    attention_gate: str | None = None

    def __post_init__(self):
        if self.query_mode not in QUERY_MODES:
            raise ConfigError(
                f"query_mode {self.query_mode!r} is not one of {', '.join(QUERY_MODES)}"
            )
        if self.attention_gate not in ATTENTION_GATES:
            raise ConfigError(f"attention_gate {self.attention_gate!r}: headwise or elementwise")
        if self.n_head < 1 or self.d_model % self.n_head:
            raise ConfigError(
                f"model: n_head: {self.n_head} does not divide d_model = {self.d_model}"
            )


@dataclass(frozen=True)
class TrainSettings:
    """A preset's `train` section: steps, batch, schedule, AdamW's constants, evaluation, seeds."""

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
    schedule: str  # after the warm-up: cosine to lr_min, or linear to zero
    # The divergence stop (repro.training.logs); defaults in preset.schema.yaml.
    divergence_margin: float | None
    divergence_evaluations: int
    beta1: float
    beta2: float
    adam_eps: float

    @property
    def eval_batches(self) -> int:
        return self.eval_sequences // self.eval_micro_batch

    @property
    def evaluations(self) -> int:
        """How many times a run evaluates: at steps 0, eval_interval, ... up to max_step."""
        return self.max_step // self.eval_interval + 1


@dataclass(frozen=True)
class Runtime:
    """A preset's `runtime` section: how this machine runs, never what is computed."""

    device: str
    compile: str | bool  # auto: on CUDA only
    # A number, `auto` or None until repro.training.loop.with_train_micro_batch resolves it.
    train_micro_batch: int | str | None
    log_interval: int
    checkpoint_interval: int
    loss_chunks: int
    fused_projection: str | bool  # residual_gelu's fused K, V, W1 matmul; auto: on CUDA
    compile_mode: str  # torch.compile's mode
    attention: str  # the SDPA backend: auto, or one of repro.runtime.device.SDPA_BACKENDS
    # The LM head and loss with their gradients in one pass (repro.model): false, or its kernel
    # (true is repro's own, the key's first values).
    fused_loss: bool | str
    deterministic: bool  # torch's deterministic algorithms (repro.runtime.determinism)
    # W&B and MLflow beside TensorBoard (repro.rundir.trackers); None: their libraries' variables
    trackers: tuple = ()
    tracker_project: str | None = None  # the W&B project and the MLflow experiment
    wandb_mode: str | None = None  # online, offline or disabled
    mlflow_tracking_uri: str | None = None

    @property
    def loss_kernel(self) -> str | None:
        """The fused loss's kernel (repro.model.FUSED_LOSSES), None where the loss is not fused."""
        return {True: "repro", False: None}.get(self.fused_loss, self.fused_loss)

    def enabled(self, switch: str, device_type: str) -> bool:
        """A switch of this section (compile, fused_projection) on a device: auto = on CUDA."""
        setting = getattr(self, switch)
        return setting is True or (setting == "auto" and device_type == "cuda")


@dataclass(frozen=True)
class Report:
    """A preset's `report` section: what the tables read from the runs."""

    table_step: int
    equal_rate: bool = False  # Table 1 also holds the linear query at each nonlinear query's rate


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
    model: ModelConfig  # the sizes every experiment shares; query_mode, mlp_hidden: each one's
    train: TrainSettings
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


def is_preset_name(name) -> bool:
    """Whether `name` can name a preset: one folder's name (results/runs/<preset>/,
    results/<preset>/), as a preset's file stem is, never a path out of the folder it is in."""
    return isinstance(name, str) and name not in ("", ".", "..") and not set(name) & set("/\\\0")


def seed_dir(base: str | os.PathLike, seed: int | str) -> str:
    """Where seed k's runs (or indices) of a preset are: `base` for seed 0, base/seed<k> else."""
    return str(base) if str(seed) == "0" else os.path.join(base, f"seed{seed}")


def folder_seed(name: str) -> int | None:
    """The seed k of seed_dir's seed<k> folder named `name`; None for any other name."""
    match = re.fullmatch(r"seed([1-9][0-9]{0,9})", name)
    return int(match[1]) if match and int(match[1]) <= MAX_SEED else None
