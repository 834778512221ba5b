"""Checks between a configuration's values, which the JSON schemas cannot express.

Each value can be valid alone and the run still break hours in: warm-up as long as the decay
divides by zero in the schedule, a table step that is never evaluated gives Table 1 a NaN. These
checks run when a preset or an experiment is loaded and when a run is assembled from them
(on the values training will use), before anything is computed.
"""

from __future__ import annotations

from repro.config.schema import ConfigError


def check_divides(source, key: str, value: int, other_key: str, other: int) -> None:
    if value < 1 or other % value:
        raise ConfigError(f"{source}: {key}: {value} does not divide {other_key} = {other}")


def check_relations(source, train, runtime, report) -> None:
    """The relations between the values of a preset's sections, or of a run's (the preset's with
    an experiment's overrides and the runtime overrides: repro.config.RunConfig)."""
    t = train
    for key in ("batch_size", "eval_sequences"):
        check_divides(
            source, "train.eval_micro_batch", t.eval_micro_batch, f"train.{key}", getattr(t, key)
        )
    check_micro_batch(source, runtime, t)
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


def check_micro_batch(source, runtime, train) -> None:
    """The one relation a runtime setting takes part in: a training micro-batch that is a number
    divides the batch."""
    micro_batch = runtime.train_micro_batch
    if isinstance(micro_batch, int):
        check_divides(
            source, "runtime.train_micro_batch", micro_batch, "train.batch_size", train.batch_size
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
