"""The authors' released runs (docs/specification.md §8) as run directories of ours."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import torch

from repro.analysis.curves import relative_improvement
from repro.analysis.runs import read_run
from repro.annex.authors.checkpoint import authors_model_config, authors_step
from repro.annex.authors.folders import source_of
from repro.annex.perf.cost import model_size
from repro.config import Experiments, Preset, RunConfig, resolve_run
from repro.errors import ReproError
from repro.files import make_dir, read_json
from repro.rundir import (
    METRICS_CSV,
    RUN_JSON,
    RunRecord,
    code_version,
    identity_differences,
    read_record,
    write_metrics,
)
from repro.rundir.tensorboard import write_events
from repro.training.checkpoints import read_checkpoint
from repro.training.loop import Schedule

AUTHORS = "authors"  # RunRecord.source of an imported run
TRAIN_TENSOR = "tensor.pt"
EVAL_TENSORS = {"train": "eval_train_tensor.pt", "val": "eval_val_tensor.pt"}
CHECKPOINT = "ckpt.pt"
CHECKPOINT_TABLE_COLUMNS = (
    "experiment authors_config checkpoint_step val_loss_at_checkpoint_step "
    "logged_val_loss_at_checkpoint_step table_step val_loss_at_table_step "
    "logged_val_loss_at_table_step paper_val_loss paper_rel_improvement"
).split()


class AuthorsError(ReproError):
    """An authors' folder that cannot be imported as asked; the message names the file."""


def read_tensor(path: Path, rows: int) -> torch.Tensor:
    """One of their loss tensors, checked to be (rows, 3) non-negative real numbers."""
    if not path.exists():
        raise AuthorsError(f"{path}: no such file")
    tensor = read_checkpoint(path)
    if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != (rows, 3):
        shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise AuthorsError(f"{path}: shape {shape}, expected ({rows}, 3) for this configuration")
    if not tensor.is_floating_point():  # bool, integer and complex tensors are no loss log
        raise AuthorsError(f"{path}: holds {tensor.dtype}, not floating-point losses")
    tensor = tensor.double()
    negative = (tensor < 0).nonzero()
    if len(negative):
        row, column = negative[0].tolist()
        raise AuthorsError(f"{path}: row {row}, column {column} is {tensor[row, column].item()}")
    return tensor


def check_evaluations(evals: dict, diverged: int | None, run: RunConfig, folder: Path) -> None:
    """Refuse a non-finite evaluation loss before divergence: it would be read as a result."""
    for split, tensor in evals.items():
        for row in (~torch.isfinite(tensor)).any(dim=1).nonzero().flatten().tolist():
            step = row * run.train.eval_interval
            if diverged is None or step < diverged:
                raise AuthorsError(
                    f"{folder / EVAL_TENSORS[split]}: row {row} (step {step}) holds "
                    f"{tensor[row].tolist()}, in a run that had not diverged"
                )


def authors_settings(model_args: dict) -> dict:
    """Their model_args' optimiser and schedule in our names (with their train.py's defaults)."""
    lr = model_args.get("learning_rate", 6e-4)
    return {
        "lr_max": lr,
        "lr_min": model_args.get("min_lr", lr / 10),
        "weight_decay": model_args.get("weight_decay", 0.1),
        "warmup_steps": model_args.get("warmup_iters", 2000),
        "decay_steps": model_args.get("lr_decay_iters", 600000),
        "max_step": model_args.get("max_iters", 600000),
    }


def authors_model_args(state, path: Path) -> dict:
    if not isinstance(state, dict) or "model_args" not in state:
        found = ", ".join(map(str, state)) if isinstance(state, dict) else type(state).__name__
        raise AuthorsError(f"{path}: not an authors' checkpoint (no model_args; found {found})")
    return state["model_args"]


def _comparable(run: RunConfig, model_args: dict | None, path: Path) -> tuple[dict, dict]:
    """Ours and theirs as two dicts that agree when the run is the one they trained."""

    def model(config):
        return asdict(replace(config, query_scale=round(config.resolved_query_scale, 9)))

    ours = {
        "model": model(run.model),
        "settings": {k: getattr(run.optimizer, k) for k in ("lr_max", "lr_min", "weight_decay")}
        | {k: getattr(run.train, k) for k in ("warmup_steps", "decay_steps", "max_step")},
    }
    if model_args is None:
        return ours, ours
    return ours, {
        "model": model(authors_model_config(model_args, path)),
        "settings": authors_settings(model_args),
    }


def check_configuration(folder: Path, run: RunConfig, model_args: dict | None) -> None:
    ours, theirs = _comparable(run, model_args, folder / CHECKPOINT)
    differences = [d for d in identity_differences(theirs, ours) if not _close(d, theirs, ours)]
    if differences:
        raise AuthorsError(
            f"{folder / CHECKPOINT}: model_args differ from experiment "
            f"{run.experiment.name} ({'; '.join(differences)})"
        )


def _close(difference: str, theirs: dict, ours: dict) -> bool:
    """Floats equal to 9 significant digits (their configs compute some, e.g. 6e-4/sqrt(1.125))."""
    section, key = difference.split(":")[0].split(".")
    a, b = theirs[section].get(key), ours[section].get(key)
    return isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-9)


def metric_rows(train_losses: torch.Tensor, evals: dict, run: RunConfig) -> list[dict]:
    t, schedule, per_step = run.train, Schedule.of(run), run.tokens_per_step
    logged = [s for s, loss in enumerate(train_losses[:, 0].tolist()) if loss != 0]
    evaluated = {e * t.eval_interval for e in range(len(evals["val"])) if evals["val"][e, 0] > 0}
    rows = []
    for step in range(max([*logged, *evaluated], default=-1) + 1):
        loss = train_losses[step, 0].item()
        row = {
            "step": step,
            "tokens_seen": (step + 1) * per_step,
            "lr": schedule(step),
            "train_loss": loss if loss != 0 else None,
        }
        if step in evaluated:
            for split, tensor in evals.items():
                row[f"eval_{split}_loss"], row[f"eval_{split}_std"] = tensor[
                    step // t.eval_interval, 1:
                ].tolist()
        rows.append(row)
    return rows


def _diverged_step(rows: list[dict], ceiling: float | None) -> int | None:
    for row in rows:
        loss = row["train_loss"]
        if loss is not None and (not math.isfinite(loss) or (ceiling and loss > ceiling)):
            return row["step"]
    return None


def _refuse_overwrite(out: Path) -> None:
    if (out / RUN_JSON).exists() and read_record(out).source != AUTHORS:
        raise AuthorsError(
            f"{out / RUN_JSON} holds a run trained here; refusing to overwrite "
            f"it with an imported one: use another --out"
        )


def import_authors_run(
    folder: Path, out: Path, preset: Preset, experiments: Experiments, experiment: str | None = None
) -> RunRecord:
    """Their folder -> out/metrics.csv and out/run.json (source "authors"); the record."""
    folder, out = Path(folder), Path(out)
    source = source_of(folder)
    chosen = experiments[experiment] if experiment else experiments.by_source(source or "")
    if chosen is None:
        raise AuthorsError(
            f"{folder}: no experiment of {experiments.source} has source "
            f"{source!r}; name one with --experiment"
        )
    run = resolve_run(preset, chosen)
    t = run.train
    has_checkpoint = (folder / CHECKPOINT).exists()
    state = read_checkpoint(folder / CHECKPOINT, mmap=True) if has_checkpoint else None
    model_args = authors_model_args(state, folder / CHECKPOINT) if has_checkpoint else None
    check_configuration(folder, run, model_args)
    train_losses = read_tensor(folder / TRAIN_TENSOR, t.max_step + 1)
    evals = {
        split: read_tensor(folder / name, t.evaluations) for split, name in EVAL_TENSORS.items()
    }
    rows = metric_rows(train_losses, evals, run)
    diverged = _diverged_step(rows, t.loss_ceiling)
    check_evaluations(evals, diverged, run, folder)
    checkpoint_step = authors_step(state, folder / CHECKPOINT) if has_checkpoint else None
    make_dir(out)
    _refuse_overwrite(out)
    # A re-import drops the record first: killed part-way, no old record stands beside new rows.
    (out / RUN_JSON).unlink(missing_ok=True)
    write_metrics(out / METRICS_CSV, rows)
    write_events(out, rows)  # their curves in TensorBoard beside ours
    final = evals["val"][-1, 0] > 0
    size = model_size(run.model)
    record = RunRecord(
        status="diverged" if diverged is not None else "completed" if final else "stopped",
        preset=preset.name,
        experiment=chosen.name,
        identity=run.identity(),
        config=run.to_dict(),
        tokens_per_step=run.tokens_per_step,
        params={k: size[k] for k in ("total_params", "non_embedding_params")},
        last_step=rows[-1]["step"] if rows else None,
        diverged_step=diverged,
        data={
            "authors_folder": str(folder),
            "authors_config": source,
            "checkpoint_step": checkpoint_step,
        },
        **code_version(),
        source=AUTHORS,
    )
    record.write(out)
    return record


def checkpoint_table(
    evaluations_dir: Path,
    authors_runs_dir: Path,
    preset: Preset,
    experiments: Experiments,
    group: str = "table1",
) -> pd.DataFrame:
    """Table 1 from the authors' checkpoints evaluated on our data (docs/annex/authors.md)."""
    rows = []
    for e in experiments.group(group):
        paths = {
            k: Path(evaluations_dir) / f"{e.name}.{k}-step.json" for k in ("checkpoint", "table")
        }
        if not all(path.exists() for path in paths.values()):
            continue
        own, table = (read_json(paths[k], AuthorsError) for k in ("checkpoint", "table"))
        logged = read_run(Path(authors_runs_dir) / e.name)
        rows.append(
            {
                "experiment": e.name,
                "authors_config": e.source,
                "checkpoint_step": own["step"],
                "val_loss_at_checkpoint_step": own["eval_val_loss"],
                "logged_val_loss_at_checkpoint_step": logged.loss_at(own["step"]),
                "table_step": table["step"],
                "val_loss_at_table_step": table["eval_val_loss"],
                "logged_val_loss_at_table_step": logged.loss_at(table["step"]),
                "paper_val_loss": e.paper.val_loss if e.paper else None,
                "paper_rel_improvement": e.paper.rel_improvement if e.paper else None,
            }
        )
    frame = pd.DataFrame(rows, columns=CHECKPOINT_TABLE_COLUMNS)
    base = frame.loc[frame["experiment"] == experiments.baseline, "val_loss_at_table_step"]
    frame.insert(
        7,
        "rel_improvement",
        relative_improvement(
            frame["val_loss_at_table_step"], base.iloc[0] if len(base) else math.nan
        ),
    )
    return frame
