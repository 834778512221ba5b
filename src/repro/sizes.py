"""What the model's modules derive from its configuration's fields (docs/specification.md §1).

The model's own modules (sizes.py, attention.py, model.py) import nothing else of the package, and
each other relatively: an export carries them, loaded with trust_remote_code=True without repro.
"""

# The modes whose query goes through the bottleneck MLP of eq. (3) (repro.attention.QueryMLP).
QUERY_MLP_MODES = ("residual_gelu", "residual_bottleneck_linear")


class ModelSizes:
    """The sizes and switches derived from the fields n_head, d_model, query_mode, query_scale."""

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

    @property
    def has_query_mlp(self) -> bool:
        return self.query_mode in QUERY_MLP_MODES
