"""An independent audit's logs as run directories of ours: a reference, read-only, never trained.

The audit (a fork of the authors' code, 25simsa1/1beyond_query_linearity) publishes the loss
curves of its runs in neurreps_writeup/logs/, one CSV a run: the header `step,train_loss,val_loss`,
then one row per evaluation (every 1000 steps from 0) with the losses its evaluation printed on
the training and on the validation sequences. A run its guard stopped has a shorter log. The
folder also holds attention-logit probes (header `step,L0,L12,...,max`), which are no loss logs
and are left out. A log's scale is the start of its name: gpt3large_* (GPT-3 Large, the `large`
preset) or gpt3small_* (GPT-3 small, the paper's GPT-2 small shape: the `paper` preset); its
learning rate and other settings are in the audit's code, not in the log.

`import_audit_log` turns one log into metrics.csv and run.json (source "audit"), named as the log
or as an experiment of ours that the user says it is; `import_audit_logs` a whole folder.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from repro.config import Experiments, Preset, load_preset, resolve_run
from repro.errors import ReproError
from repro.files import file_sha256, make_dir
from repro.perf.cost import model_size
from repro.rundir import METRICS_CSV, RUN_JSON, RunRecord, code_version, read_record, write_metrics
from repro.runtime.tensorboard import write_events

AUDIT = "audit"  # RunRecord.source of an imported log
LOG_COLUMNS = ["step", "train_loss", "val_loss"]
PROBE_COLUMN = re.compile(r"L[0-9]+|max")  # an attention-logit probe's columns, after `step`
SCALES = {"gpt3large": "large", "gpt3small": "paper"}  # a log name's first word: its preset


class AuditError(ReproError):
    """An audit log that cannot be imported as asked; the message names the file and line."""


def _header(path: Path) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError) as e:
        raise AuditError(f"{path}: cannot be read ({e})") from None


def is_probe(path: Path) -> bool:
    """Whether a CSV of the logs folder is an attention-logit probe, not a loss log."""
    header = _header(path)
    return header[:1] == ["step"] and all(PROBE_COLUMN.fullmatch(c) for c in header[1:])


def read_audit_log(path: str | Path) -> list[dict]:
    """The evaluations of one loss log, checked: each {step, eval_train_loss, eval_val_loss}.

    Steps are whole numbers, increasing; losses are non-negative numbers, NaN or infinite only in
    the last row (where a guard stopped a diverged run). Anything else is refused, naming the
    line and the column."""
    path = Path(path)
    try:
        lines = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    except (OSError, UnicodeDecodeError) as e:
        raise AuditError(f"{path}: cannot be read ({e})") from None
    if not lines or lines[0] != LOG_COLUMNS:
        found = ",".join(lines[0]) if lines else "nothing"
        raise AuditError(
            f"{path}, line 1: {found[:80]!r}, not the audit's header {','.join(LOG_COLUMNS)}"
        )
    if len(lines) == 1:
        raise AuditError(f"{path}: no evaluation rows after the header")
    evaluations = []
    for number, fields in enumerate(lines[1:], start=2):
        where = f"{path}, line {number}"
        if len(fields) != len(LOG_COLUMNS):
            raise AuditError(f"{where}: {len(fields)} fields, not {len(LOG_COLUMNS)}")
        step, train, val = fields
        if not step.isdigit():
            raise AuditError(f"{where}, column step: {step[:40]!r} is not a step")
        if evaluations and int(step) <= evaluations[-1]["step"]:
            raise AuditError(
                f"{where}, column step: {step} after {evaluations[-1]['step']} (not increasing)"
            )
        row = {"step": int(step)}
        for column, value in (("train_loss", train), ("val_loss", val)):
            try:
                loss = float(value)
            except ValueError:
                raise AuditError(
                    f"{where}, column {column}: {value[:40]!r} is not a number"
                ) from None
            if loss < 0 or (not math.isfinite(loss) and number < len(lines)):
                raise AuditError(
                    f"{where}, column {column}: {value} is not a loss"
                    + ("" if loss < 0 else " (only a log's last row may be non-finite)")
                )
            row[f"eval_{column}"] = loss
        evaluations.append(row)
    return evaluations


def _status(evaluations: list[dict], preset: Preset) -> tuple[str, str | None]:
    """completed (the log reaches the preset's last evaluation), diverged (it ends on a non-finite
    loss, or more than the preset's divergence margin above its best: what the audit's guard
    stops) or stopped (it ends early without diverging); and why it diverged."""
    t = preset.train
    last = evaluations[-1]
    if last["step"] >= t.max_step - t.max_step % t.eval_interval:
        return "completed", None
    best = min(e["eval_val_loss"] for e in evaluations)
    losses = (last["eval_train_loss"], last["eval_val_loss"])
    if not all(map(math.isfinite, losses)):
        return "diverged", f"the log ends on a non-finite loss at step {last['step']}"
    margin = t.divergence_margin
    if margin is not None and last["eval_val_loss"] > best + margin:
        return "diverged", (
            f"the log ends at validation loss {last['eval_val_loss']:.4f}, more than {margin:g} "
            f"above its best {best:.4f}"
        )
    return "stopped", None


def metric_rows(evaluations: list[dict], tokens_per_step: int) -> list[dict]:
    """metrics.csv rows, one per step up to the log's last (evaluation columns where it has one)."""
    by_step = {e["step"]: e for e in evaluations}
    return [
        {"step": step, "tokens_seen": (step + 1) * tokens_per_step}
        | {k: v for k, v in by_step.get(step, {}).items() if k != "step"}
        for step in range(evaluations[-1]["step"] + 1)
    ]


def _refuse_overwrite(out: Path) -> None:
    if (out / RUN_JSON).exists() and read_record(out).source != AUDIT:
        raise AuditError(
            f"{out / RUN_JSON} holds a run that is not an imported audit log; refusing to "
            f"overwrite it: use another --out"
        )


def import_audit_log(
    path: str | Path,
    out: str | Path,
    preset: Preset,
    experiments: Experiments | None = None,
    experiment: str | None = None,
) -> RunRecord:
    """One loss log -> out/metrics.csv and out/run.json (source "audit"); the record. Named as
    `experiment` (an experiment of ours the user says the audit's run is: its configuration is
    recorded) or else as the log's file name (no configuration: the log holds none)."""
    path, out = Path(path), Path(out)
    evaluations = read_audit_log(path)
    run = resolve_run(preset, experiments[experiment]) if experiment else None
    status, reason = _status(evaluations, preset)
    rows = metric_rows(evaluations, preset.tokens_per_step)
    make_dir(out)
    _refuse_overwrite(out)
    (out / RUN_JSON).unlink(missing_ok=True)  # killed part-way: no old record beside new rows
    write_metrics(out / METRICS_CSV, rows)
    write_events(out, [r for r in rows if "eval_val_loss" in r])  # the rows with a value
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
        diverged_reason=reason,
        data={"audit_log": str(path.resolve()), "sha256": file_sha256(path)},
        **code_version(),
        source=AUDIT,
    )
    record.write(out)
    return record


def audit_logs(folder: str | Path) -> list[Path]:
    """The loss logs of the audit's logs folder (its *.csv, the attention-logit probes left out),
    each read and checked before anything is written."""
    folder = Path(folder)
    if not folder.is_dir():
        raise AuditError(f"{folder}: no such folder (the audit's neurreps_writeup/logs/)")
    logs = [p for p in sorted(folder.glob("*.csv")) if not is_probe(p)]
    if not logs:
        raise AuditError(f"{folder}: no loss log (*.csv with the header step,train_loss,val_loss)")
    for log in logs:
        read_audit_log(log)
        preset_of(log)
    return logs


def preset_of(log: Path) -> str:
    """The preset of a log's scale, from the first word of its name."""
    scale = log.stem.split("_")[0]
    if scale not in SCALES:
        known = ", ".join(f"{k}_* ({v})" for k, v in SCALES.items())
        raise AuditError(f"{log}: its name does not say its scale (known: {known})")
    return SCALES[scale]


def import_audit_logs(folder: str | Path, out: str | Path, config_dir=None) -> list[RunRecord]:
    """Every loss log of the folder -> out/<preset>/<log name>/, after all are checked."""
    return [
        import_audit_log(
            log, Path(out) / preset_of(log) / log.stem, load_preset(preset_of(log), config_dir)
        )
        for log in audit_logs(folder)
    ]
