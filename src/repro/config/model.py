"""The model's configuration: its shape and the query mode compared (docs/specification.md §1)."""

from __future__ import annotations

from dataclasses import dataclass

from repro.config.relations import check_divides
from repro.config.schema import ConfigError
from repro.sizes import ModelSizes

QUERY_MODES = (
    "linear",
    "identity",
    "residual_gelu",
    "residual_linear",
    "residual_bottleneck_linear",
)
# A sigmoid gate on each head's attention output (repro.attention.AttentionGate): none, one per head
# or one per channel.
ATTENTION_GATES = (None, "headwise", "elementwise")


@dataclass(frozen=True)
class ModelConfig(ModelSizes):
    """Everything the model's shape and function depend on (docs/specification.md §1); the sizes
    derived from it are ModelSizes'."""

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
        check_divides("model", "n_head", self.n_head, "d_model", self.d_model)
