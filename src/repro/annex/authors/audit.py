"""An independent audit's loss logs as read-only run directories of ours (docs/annex/authors.md)."""

from __future__ import annotations

import math
from pathlib import Path

from repro.analysis.stated import stated_conflicts
from repro.annex.authors.audit_log import (
    AuditError,
    check_stated,
    horizon_in_name,
    is_probe,
    preset_of,
    read_audit_log,
)
from repro.config import Experiments, Preset, load_preset, resolve_run
from repro.files import atomic_folder, file_sha256, make_dir
from repro.rundir import METRICS_CSV, RUN_JSON, RunRecord, code_version, read_record, write_metrics
from repro.rundir.tensorboard import EVENTS, write_events

AUDIT = "audit"  # RunRecord.source of an imported log
IMPORTED_FILES = {RUN_JSON, METRICS_CSV, EVENTS}  # all an import writes in its folder
IMPORT_LOG = "import.log"  # where the workflow's import job writes the command's output
# The audit's own divergence guard (the `large` preset's divergence_margin), whatever our preset.
AUDIT_GUARD_MARGIN = 0.5
MAX_HORIZON = 1_000_000  # steps: five times the audit's longest (180k), within a memory's reach

__all__ = ["AUDIT", "AuditError", "import_audit_log", "import_audit_logs", "preset_of"]


def horizon(path: Path, preset: Preset, stated: dict, experiment: str | None):
    """The run's schedule steps and who says so, or (None, None); past MAX_HORIZON is refused."""
    if experiment:
        return preset.train.max_step, f"experiment {experiment} at preset {preset.name}"
    steps, said_by = (stated["steps"], "stated") if "steps" in stated else (None, None)
    if steps is None and horizon_in_name(path):
        steps, said_by = horizon_in_name(path), "its name"
    if steps is not None and steps > MAX_HORIZON:
        raise AuditError(
            f"{path}: a horizon of {steps:,} steps ({said_by}), more than {MAX_HORIZON:,}: not "
            f"one of the audit's runs"
        )
    return steps, said_by


def last_step(preset: Preset, steps: int | None) -> int:
    """A log's last possible step: its horizon's where known, else its preset's."""
    return preset.train.max_step if steps is None else steps


def _status(evaluations: list[dict], preset: Preset, steps: int | None) -> tuple[str, str]:
    """diverged (as the audit's guard judges), completed (a known horizon reached) or stopped."""
    last = evaluations[-1]
    losses = (last["eval_train_loss"], last["eval_val_loss"])
    if not all(map(math.isfinite, losses)):
        return "diverged", f"the log ends on a non-finite loss at step {last['step']}"
    best = min(e["eval_val_loss"] for e in evaluations)
    margin = AUDIT_GUARD_MARGIN
    if last["eval_val_loss"] > best + margin:
        return "diverged", (
            f"the log ends at validation loss {last['eval_val_loss']:.4f}, more than {margin:g} "
            f"above its best {best:.4f}"
        )
    if steps is None:
        return "stopped", f"stopped at step {last['step']}, its horizon unknown"
    if last["step"] >= steps - steps % preset.train.eval_interval:
        return "completed", f"completed its {steps}-step horizon"
    return "stopped", f"stopped at step {last['step']} of its {steps}-step horizon"


def metric_rows(evaluations: list[dict], tokens_per_step: int) -> list[dict]:
    by_step = {e["step"]: e for e in evaluations}
    return [
        {"step": step, "tokens_seen": (step + 1) * tokens_per_step}
        | {k: v for k, v in by_step.get(step, {}).items() if k != "step"}
        for step in range(evaluations[-1]["step"] + 1)
    ]


def _refuse_foreign(out: Path) -> None:
    """Refuse to import beside a training run's files: only into a new, empty or imported folder."""
    entries = {p.name for p in out.iterdir()} - {IMPORT_LOG}
    if not entries:
        return
    imported = (out / RUN_JSON).is_file() and read_record(out).source == AUDIT
    foreign = sorted(entries - IMPORTED_FILES)
    if not imported or foreign:
        held = ", ".join(foreign or sorted(entries))
        raise AuditError(
            f"{out}: holds {held}, not an earlier import of an audit log (perhaps a training "
            f"run's); refusing to write there: use another --out"
        )


def import_audit_log(
    path: str | Path,
    out: str | Path,
    preset: Preset,
    experiments: Experiments | None = None,
    experiment: str | None = None,
    stated: dict | None = None,
) -> RunRecord:
    """One loss log -> out/metrics.csv and run.json (source "audit"); the record."""
    path, out = Path(path), Path(out)
    stated = check_stated(dict(stated or {}), f"the stated configuration of {path.name}")
    run = resolve_run(preset, experiments[experiment]) if experiment else None
    conflicts = stated_conflicts(stated, run.identity()) if run else []
    if conflicts:
        raise AuditError(
            f"--stated: {conflicts[0]} (stated -> experiment {experiment}'s): the statement is "
            f"of another run than --experiment {experiment}; give one of them"
        )
    steps, said_by = horizon(path, preset, stated, experiment)
    evaluations = read_audit_log(path, last_step(preset, steps))
    status, reason = _status(evaluations, preset, steps)
    rows = metric_rows(evaluations, preset.tokens_per_step)
    make_dir(out)
    _refuse_foreign(out)
    from repro.annex.perf.cost import model_size  # torch's: only once a log is read and fits

    size = model_size(run.model) if run else {}
    record = RunRecord(
        status=status,
        preset=preset.name,
        experiment=experiment or path.stem,
        identity=run.identity() if run else {},
        config=run.to_dict() if run else {},
        params={k: size[k] for k in ("total_params", "non_embedding_params") if k in size},
        tokens_per_step=preset.tokens_per_step,
        last_step=rows[-1]["step"],
        diverged_step=rows[-1]["step"] if status == "diverged" else None,
        diverged_reason=reason if status == "diverged" else None,
        data={
            "audit_log": str(path.resolve()),
            "sha256": file_sha256(path),
            "horizon": steps,
            "horizon_from": said_by,
            "outcome": f"diverged: {reason}" if status == "diverged" else reason,
            "stated": stated,
        },
        **code_version(),
        source=AUDIT,
    )
    with atomic_folder(out) as new:  # an earlier import stays whole until the new one is
        write_metrics(new / METRICS_CSV, rows)
        write_events(new, [r for r in rows if "eval_val_loss" in r])  # the rows with a value
        record.write(new)
    return record


def audit_logs(folder: str | Path) -> list[Path]:
    """The loss logs of the audit's logs folder, probes left out."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AuditError(f"{folder}: no such folder (the audit's neurreps_writeup/logs/)")
    logs = [p for p in sorted(folder.glob("*.csv")) if not is_probe(p)]
    if not logs:
        raise AuditError(f"{folder}: no loss log (*.csv with the header step,train_loss,val_loss)")
    return logs


def import_audit_logs(
    folder: str | Path, out: str | Path, config_dir=None, stated: dict | None = None
) -> list[RunRecord]:
    """Every loss log of the folder -> out/<preset>/<log name>/, after all are checked."""
    stated = dict(stated or {})
    logs = audit_logs(folder)
    unknown = sorted(set(stated) - {log.name for log in logs})
    if unknown:
        raise AuditError(f"{folder}: no loss log {unknown[0]!r}, whose configuration is stated")
    plan = [(log, load_preset(preset_of(log), config_dir)) for log in logs]
    for log, preset in plan:  # every log read and checked before anything is written
        steps = horizon(log, preset, check_stated(stated.get(log.name, {}), log.name), None)[0]
        read_audit_log(log, last_step(preset, steps))
    return [
        import_audit_log(
            log, Path(out) / preset.name / log.stem, preset, stated=stated.get(log.name)
        )
        for log, preset in plan
    ]
