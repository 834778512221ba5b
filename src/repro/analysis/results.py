"""Table 1 (docs/specification.md §3) from a preset's runs, beside the paper's numbers."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from repro.analysis.curves import relative_improvement
from repro.analysis.runs import Run, read_runs
from repro.config import Experiment, Experiments, Preset, load_config, load_preset, resolve_run
from repro.config.plan import equal_rate_arms, table1_experiments
from repro.config.preset import MAX_SEED
from repro.data.tokens import MANIFEST
from repro.rundir import identity_differences

TABLE1_COLUMNS = [
    "experiment",
    "query_mode",
    "mlp_ratio",
    "lr_max",
    "lr_min",
    "weight_decay",
    "non_embedding_params",
    "step",
    "val_loss",
    "val_bpb",  # bits per byte of the validation sequences evaluated (val_bpb)
    "rel_improvement",
    "paper_val_loss",
    "paper_rel_improvement",
    "status",
    "preset",
    "config_differences",
    "caveat",
]


def recorded_configuration(
    experiment: Experiment, run: Run | None, preset: Preset
) -> tuple[dict, str]:
    """The experiment's settings as its run recorded them, and where the files now differ."""
    current = {
        "query_mode": experiment.query_mode,
        "mlp_ratio": experiment.mlp_ratio,
        **asdict(experiment.optimizer),
    }
    if run is None:
        return current, ""
    # run.json's identity is in today's layout (repro.rundir reads it so).
    recorded = {
        **current,
        **run.record.config.get("experiment", {}),
        **run.record.identity.get("optimizer", {}),
    }
    return recorded, "; ".join(run_differences(run, experiment, preset))


def run_differences(run: Run, experiment: Experiment, preset: Preset) -> list[str]:
    """What the run recorded that `experiment` now is not; every table reading runs checks this."""
    named = run.record.experiment
    other = [] if named == experiment.name else [f"experiment: {named!r} -> {experiment.name!r}"]
    now = resolve_run(preset, experiment).identity()
    return other + identity_differences(run.record.identity, now)


def scale_caveat(preset: Preset, config_dir: str | Path | None = None) -> str:
    """ "" at the paper's scale, else the words that say the numbers cannot test the paper."""
    paper = load_preset("paper", config_dir)
    if (preset.model, preset.train) == (paper.model, paper.train):
        return ""
    if (preset.model, preset.corpus) == (paper.model, paper.corpus):
        return (
            f"preset {preset.name} is the paper's model and data on a shorter schedule "
            f"({preset.train.max_step + 1} steps): a screen of the paper's claims, not its numbers"
        )
    if preset.corpus == paper.corpus and preset.model.d_model > paper.model.d_model:
        m = preset.model
        return (
            f"preset {preset.name} is a larger model than the paper's ({m.n_layer} layers, "
            f"d_model {m.d_model}) on its data: whether its claims hold one size up, not its "
            f"numbers"
        )
    return (
        f"preset {preset.name} is not the paper's scale: these numbers show that the "
        f"pipeline runs, they cannot test the paper"
    )


def equal_rate_caveat(table: pd.DataFrame, experiments: Experiments) -> str:
    """Each nonlinear query's gap over the baseline beside its gap at equal learning rate."""
    losses = table.set_index("experiment")["val_loss"]
    said, base = [], experiments.baseline
    for name, linear in equal_rate_arms(experiments, list(losses.index)).items():
        if {linear, base} <= set(losses.index) and not losses[[name, linear, base]].isna().any():
            lr = experiments[name].optimizer.lr_max
            ahead = [relative_improvement(losses[name], losses[o]) for o in (base, linear)]
            said.append(
                f"{name} is {ahead[0]:.2%} ahead of the baseline, {ahead[1]:.2%} ahead of "
                f"{linear} (the linear query at its learning rate, {lr:g}): the difference "
                f"between the two gaps is the learning rate's, not the query's"
            )
    return "; ".join(said)


def table1_row(
    experiment: Experiment, run: Run | None, preset: Preset, baseline_loss: float
) -> dict:
    """One row of Table 1; config_differences: what the files now say otherwise (retrain)."""
    step = preset.report.table_step
    loss = run.loss_at(step) if run is not None else math.nan
    params = run.record.params if run is not None else {}
    paper = experiment.paper
    recorded, differences = recorded_configuration(experiment, run, preset)
    return {
        "experiment": experiment.name,
        **{key: recorded[key] for key in TABLE1_COLUMNS[1:6]},
        "non_embedding_params": params.get("non_embedding_params"),
        "step": step,
        "val_loss": loss,
        "val_bpb": val_bpb(run, loss, step, preset),
        "rel_improvement": relative_improvement(loss, baseline_loss),
        "paper_val_loss": paper.val_loss if paper else None,
        "paper_rel_improvement": paper.rel_improvement if paper else None,
        "status": run.status if run is not None else "missing",
        "preset": preset.name,
        "config_differences": differences,
    }


def val_bpb(run: Run | None, loss: float, step: int, preset: Preset) -> float:
    """A validation loss at `step` (nats per token) in bits per byte of the text it was the loss
    of: the evaluation sequences the run's fixed indices give that step, read from its token
    files (NaN where they or the indices are not at hand)."""
    if run is None or math.isnan(loss):
        return math.nan
    data, indices = (run.record.data or {}).get("dir"), (run.record.indices or {}).get("dir")
    if data is None or indices is None:
        return math.nan
    from repro.data.batches import SIDECAR  # here: it loads torch, which a table need not

    if not (Path(data) / MANIFEST).is_file() or not (Path(indices) / SIDECAR).is_file():
        return math.nan
    seed = (run.record.config or {}).get("seed", 0)  # seed k's indices: drawn at index_seed + k
    if type(seed) is not int or not 0 <= seed <= MAX_SEED:
        return math.nan
    preset = preset.with_seed(seed)
    row = step // preset.train.eval_interval  # the evaluation row training read at `step`
    return loss / math.log(2) / evaluated_bytes_per_token(Path(data), Path(indices), row, preset)


# Fixed by the indices: read once per row and evaluation shape, whichever runs share them.
_EVALUATED_BYTES: dict[tuple, float] = {}


def evaluated_bytes_per_token(data: Path, indices: Path, row: int, preset: Preset) -> float:
    """UTF-8 bytes per target token of the validation sequences evaluated at `row`."""
    from repro.data.batches import Batches

    t = preset.train
    shape = (t.eval_batches, t.eval_micro_batch, preset.model.block_size)
    key = (str(data.resolve()), str(indices.resolve()), row, shape)
    if key not in _EVALUATED_BYTES:
        batches = Batches.open(data, indices, preset)
        _EVALUATED_BYTES[key] = batches.bytes_per_target("eval_val", row, t.eval_batches)
    return _EVALUATED_BYTES[key]


def table1(
    runs_dir: str | Path,
    preset: str | Preset,
    group: str = "table1",
    config_dir: str | Path | None = None,
    authors_runs_dir: str | Path | None = None,
) -> pd.DataFrame:
    """Table 1, one row per experiment: the validation loss at report.table_step."""
    if authors_runs_dir is not None:
        table = table1(runs_dir, preset, group, config_dir)
        theirs = table1(authors_runs_dir, preset, group, config_dir)
        for column in ("val_loss", "rel_improvement", "status"):
            table[f"authors_{column}"] = theirs[column]
        return table
    preset, experiments = load_config(preset, config_dir)
    members = table1_experiments(preset, experiments, group)
    runs = read_runs(runs_dir, [e.name for e in members])
    base = runs.get(experiments.baseline)
    baseline_loss = base.loss_at(preset.report.table_step) if base is not None else math.nan
    rows = [table1_row(e, runs.get(e.name), preset, baseline_loss) for e in members]
    table = pd.DataFrame(rows, columns=TABLE1_COLUMNS)
    caveat = scale_caveat(preset, config_dir)
    table["caveat"] = "; ".join(filter(None, [caveat, equal_rate_caveat(table, experiments)]))
    table["non_embedding_params"] = table["non_embedding_params"].astype("Int64")
    return table


def table_frame(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1 for reading: percentages, 4-decimal losses, exact parameter counts."""
    out = table.copy()
    for col in ("rel_improvement", "paper_rel_improvement"):
        out[col] = out[col].map(lambda v: "" if pd.isna(v) else f"{v:.2%}")
    for col in ("val_loss", "paper_val_loss"):
        out[col] = out[col].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
    out["non_embedding_params"] = out["non_embedding_params"].map(
        lambda v: "" if pd.isna(v) else f"{v:,}"
    )
    return out
