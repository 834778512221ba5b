"""One of the audit's loss logs (docs/annex/authors.md), read and checked; what its user states."""

from __future__ import annotations

import math
import re
from pathlib import Path

from repro.config import Experiments
from repro.config.schema import ConfigError, validate
from repro.errors import ReproError
from repro.files import read_regular

LOG_COLUMNS = ["step", "train_loss", "val_loss"]
PROBE_COLUMN = re.compile(r"L[0-9]+|max")  # an attention-logit probe's columns, after `step`
SCALES = {"gpt3large": "large", "gpt3small": "paper"}  # a log name's first word: its preset
HORIZON = re.compile(r"([0-9]+)k")  # a word of a log's name: its schedule's steps, in thousands
STEP = re.compile(r"[0-9]{1,12}")  # ASCII digits: int() would also take '²' or '1_0'
LOSS = re.compile(r"[-+]?([0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|nan|inf)", re.IGNORECASE)
MAX_LOG_BYTES = 1 << 20  # the audit's longest log (180 evaluations) is 4 KB
STATED_SCHEMA = "audit_run.schema.yaml"


class AuditError(ReproError):
    """An audit log that cannot be imported as asked; the message names the file and line."""


def log_rows(path: Path) -> list[list[str]]:
    """The comma-separated fields of each line (the audit quotes nothing: a quote is refused)."""
    data = read_regular(path, MAX_LOG_BYTES, AuditError, "one of the audit's logs")
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise AuditError(f"{path}: cannot be read ({e})") from None
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r").split(",") for line in lines]


def is_probe(path: Path) -> bool:
    rows = log_rows(path)
    header = rows[0] if rows else []
    return header[:1] == ["step"] and all(PROBE_COLUMN.fullmatch(c) for c in header[1:])


def _loss(value: str, where: str, last: bool) -> float:
    if not LOSS.fullmatch(value):
        raise AuditError(f"{where}: {value[:40]!r} is not a number")
    loss = float(value)
    if loss < 0 or (not math.isfinite(loss) and not last):
        why = "" if loss < 0 else " (only a log's last row may be non-finite)"
        raise AuditError(f"{where}: {value} is not a loss{why}")
    return loss


def read_audit_log(path: str | Path, last_step: int) -> list[dict]:
    """A log's checked evaluations; non-finite only in the last row (a guard's stop)."""
    path = Path(path)
    rows = log_rows(path)
    if not rows or rows[0] != LOG_COLUMNS:
        found = ",".join(rows[0]) if rows else "nothing"
        raise AuditError(
            f"{path}, line 1: {found[:80]!r}, not the audit's header {','.join(LOG_COLUMNS)}"
        )
    if len(rows) == 1:
        raise AuditError(f"{path}: no evaluation rows after the header")
    evaluations = []
    for number, fields in enumerate(rows[1:], start=2):
        where = f"{path}, line {number}"
        if len(fields) != len(LOG_COLUMNS):
            raise AuditError(f"{where}: {len(fields)} fields, not {len(LOG_COLUMNS)}")
        step, train, val = fields
        if not STEP.fullmatch(step):
            raise AuditError(f"{where}, column step: {step[:40]!r} is not a step")
        if int(step) > last_step:
            raise AuditError(
                f"{where}, column step: {step} is past step {last_step}, the last this run can "
                f"have (its horizon's where known, else its preset's): not that run"
            )
        if evaluations and int(step) <= evaluations[-1]["step"]:
            raise AuditError(
                f"{where}, column step: {step} after {evaluations[-1]['step']} (not increasing)"
            )
        last = number == len(rows)
        evaluations.append(
            {
                "step": int(step),
                "eval_train_loss": _loss(train, f"{where}, column train_loss", last),
                "eval_val_loss": _loss(val, f"{where}, column val_loss", last),
            }
        )
    return evaluations


def preset_of(log: Path) -> str:
    scale = log.stem.split("_")[0]
    if scale not in SCALES:
        known = ", ".join(f"{k}_* ({v})" for k, v in SCALES.items())
        raise AuditError(f"{log}: its name does not say its scale (known: {known})")
    return SCALES[scale]


def horizon_in_name(log: Path) -> int | None:
    words = [w for w in log.stem.split("_")[1:] if HORIZON.fullmatch(w)]
    return int(words[-1][:-1]) * 1000 if words else None


def check_stated(stated, source: str) -> dict:
    try:
        return validate(stated, STATED_SCHEMA, source)
    except ConfigError as e:
        raise AuditError(str(e)) from None


def check_workflow_keys(logs, runs: dict, stated: dict, experiments: Experiments, results) -> None:
    """The workflow's audit keys, checked while it parses: so, no torch or TensorBoard here."""
    if (runs or stated) and not logs:
        key = "audit_runs" if runs else "audit_configs"
        raise AuditError(f"{key} names logs, but audit_logs no folder")
    if not logs:
        return
    folder, results = Path(logs).resolve(), Path(results).resolve()
    if not folder.is_dir():
        raise AuditError(
            f"audit_logs: {logs!r} is not a folder (the audit's neurreps_writeup/logs/)"
        )
    if folder.is_relative_to(results) or results.is_relative_to(folder):
        raise AuditError(f"audit_logs: {logs!r} holds or is within the workflow's output {results}")
    for name, log in runs.items():
        if name not in experiments.by_name:
            raise AuditError(
                f"audit_runs: unknown experiment {name!r} (those of {experiments.source})"
            )
        _check_loss_log(folder, log, f"audit_runs: {name}", logs)
    for log, statement in stated.items():
        _check_loss_log(folder, log, "audit_configs", logs)
        check_stated(statement, f"audit_configs: {log}")


def _check_loss_log(folder: Path, log: str, key: str, logs) -> None:
    if not (folder / log).exists():
        raise AuditError(f"{key}: no log {log!r} in audit_logs ({logs})")
    if is_probe(folder / log):
        raise AuditError(f"{key}: {log!r} is an attention-logit probe, not a loss log")
