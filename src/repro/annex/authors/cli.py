"""The command line of the authors' artefacts and the audit's logs (docs/annex/authors.md): import
them, evaluate any checkpoint, and compare a run against a reference (repro.analysis.compare)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from repro import config
from repro.annex.authors.folders import authors_runs
from repro.config import options
from repro.files import parse_json, write_csv, write_json


def cmd_evaluate(args) -> None:
    from repro.annex.authors.checkpoint import load_any_checkpoint
    from repro.training import evaluation as evaluate

    preset = config.load_preset(args.preset, args.config_dir)
    result = evaluate.evaluate(
        args.checkpoint,
        preset,
        args.data,
        args.indices,
        step=args.step,
        device=args.device,
        load=load_any_checkpoint,
    )
    print(json.dumps(result, indent=2) if args.json else evaluate.format_result(result))


def cmd_import_authors_run(args) -> None:
    from repro.annex.authors import runs as authors

    preset, experiments = config.load_config(args.preset, args.config_dir)
    record = authors.import_authors_run(args.folder, args.out, preset, experiments, args.experiment)
    print(
        f"{args.out}: the authors' {record.data['authors_config']} as {record.experiment} "
        f"({record.status}, last step {record.last_step})"
    )


def cmd_import_audit_logs(args) -> None:
    from repro.annex.authors import audit

    stated = _stated(args.stated, "log file name -> configuration")
    records = audit.import_audit_logs(args.folder, args.out, args.config_dir, stated)
    for r in records:
        print(f"{args.out / r.preset / r.experiment}: {r.data['outcome']}")
    print(f"{args.out}: {len(records)} runs of the audit imported from {args.folder}")


def cmd_import_audit_log(args) -> None:
    from repro.annex.authors import audit

    preset, experiments = config.load_config(
        args.preset or audit.preset_of(args.log), args.config_dir
    )
    stated = _stated(args.stated, "configuration")
    record = audit.import_audit_log(
        args.log, args.out, preset, experiments, args.experiment, stated
    )
    print(
        f"{args.out}: the audit's {args.log.stem} as {record.experiment} at preset "
        f"{record.preset} ({record.data['outcome']})"
    )


def _stated(text: str | None, what: str) -> dict:
    from repro.annex.authors.audit_log import AuditError

    stated = parse_json(text or "{}", "--stated", AuditError)
    if not isinstance(stated, dict):
        raise AuditError(f"--stated: {text[:60]!r} is not a JSON object ({what})")
    return stated


def cmd_authors_runs(args) -> None:
    experiments = config.load_experiments(None, args.config_dir)
    found = authors_runs(args.artefacts, experiments)
    write_json(args.out, found)
    print(f"{args.out}: {len(found)} runs of the authors in {args.artefacts}")


def cmd_authors_table(args) -> None:
    from repro.annex.authors import runs as authors

    preset, experiments = config.load_config(args.preset, args.config_dir)
    table = authors.checkpoint_table(args.evaluations, args.runs, preset, experiments)
    write_csv(table, args.out)
    print(f"{args.out}: {len(table)} checkpoints of the authors evaluated")


def _evaluate_parser(sub) -> None:
    p = sub.add_parser(
        "evaluate",
        help="evaluation losses of a checkpoint (ours or the authors') as training computes them",
    )
    options.add_config(p, experiment=False)
    options.add_checkpoint(p)
    p.add_argument("--data", type=Path, required=True, help="token files dir")
    p.add_argument("--indices", type=Path, required=True, help="indices dir from `repro indices`")
    p.add_argument(
        "--step",
        type=int,
        help="whose evaluation sequences (default: the checkpoint's last evaluation step: its "
        "own step when training evaluates there, else the evaluation step before it)",
    )
    options.add_device(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a line")
    p.set_defaults(func=cmd_evaluate, restarts_allocator=True)


def _import_parser(sub) -> None:
    p = sub.add_parser(
        "import-authors-run", help="the authors' loss tensors -> a run directory (never trained)"
    )
    p.add_argument("folder", type=Path, help="one of the authors' out_config_* folders")
    p.add_argument("--out", type=Path, required=True, help="the run directory to write")
    p.add_argument("--preset", default="paper", help="the scale they ran at (default: paper)")
    p.add_argument("--experiment", help="default: the one whose `source` names the folder")
    options.add_config_dir(p)
    p.set_defaults(func=cmd_import_authors_run)


def _audit_parsers(sub) -> None:
    p = sub.add_parser(
        "import-audit-logs",
        help="the audit's loss logs (its neurreps_writeup/logs/ folder) -> run directories "
        "OUT/<preset>/<log name> (never trained)",
    )
    p.add_argument("folder", type=Path, help="the audit's neurreps_writeup/logs/ folder")
    p.add_argument("--out", type=Path, required=True, help="where to write the run directories")
    _stated_option(
        p, 'runs the logs hold none of: {"LOG.csv": {"steps": 180000, "query_mode": "linear", ...}}'
    )
    options.add_config_dir(p)
    p.set_defaults(func=cmd_import_audit_logs)
    p = sub.add_parser(
        "import-audit-log",
        help="one of the audit's loss logs -> a run directory, as an experiment of ours",
    )
    p.add_argument("log", type=Path, help="one CSV of the audit's neurreps_writeup/logs/")
    p.add_argument("--out", type=Path, required=True, help="the run directory to write")
    p.add_argument("--preset", help="the scale it ran at (default: from its name's first word)")
    p.add_argument(
        "--experiment",
        help="the experiment of ours it is (its configuration is recorded; Figure 1 draws it "
        "beside ours); default: the log's name, no configuration",
    )
    _stated_option(p, 'its run, e.g. {"steps": 180000, "schedule": "linear"}')
    options.add_config_dir(p)
    p.set_defaults(func=cmd_import_audit_log)


def _stated_option(p, example: str) -> None:
    p.add_argument(
        "--stated", metavar="JSON", help=f"what you know of {example} (keys: docs/annex/authors.md)"
    )


def _authors_runs_parser(sub) -> None:
    p = sub.add_parser(
        "authors-runs", help="which experiments the authors' downloaded run folders are (JSON)"
    )
    p.add_argument("artefacts", type=Path, help="the downloaded folder of out_config_* folders")
    p.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    options.add_config_dir(p)
    p.set_defaults(func=cmd_authors_runs)


def _authors_table_parser(sub) -> None:
    p = sub.add_parser(
        "authors-table", help="Table 1 recomputed from the evaluations of the authors' checkpoints"
    )
    p.add_argument(
        "--evaluations",
        type=Path,
        required=True,
        help="the `repro evaluate --json` outputs, <experiment>.{checkpoint,table}-step.json",
    )
    p.add_argument("--runs", type=Path, required=True, help="the imported runs of the authors")
    p.add_argument("--preset", default="paper", help="the scale they ran at (default: paper)")
    p.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    options.add_config_dir(p)
    p.set_defaults(func=cmd_authors_table)


def reference_run(reference: Path, run, config_dir):
    """REF as a run: a run directory, or an authors' folder or audit log imported to a temp one."""
    from repro.analysis.runs import read_run
    from repro.annex.authors import audit
    from repro.annex.authors import runs as authors

    is_log = reference.suffix == ".csv" and not reference.is_dir()  # a FIFO too: refused there
    if not is_log and not (reference / authors.EVAL_TENSORS["val"]).exists():
        return read_run(reference)
    preset, experiments = config.load_config(run.record.preset, config_dir)
    with tempfile.TemporaryDirectory() as out:
        if is_log:
            audit.import_audit_log(reference, Path(out), preset)
        else:
            authors.import_authors_run(reference, Path(out), preset, experiments, run.name)
        return read_run(out)


def cmd_compare(args) -> None:
    from repro.analysis import compare
    from repro.analysis.runs import read_run

    options.check_positive(args, "tolerance")
    run = read_run(args.run)
    reference = reference_run(args.reference, run, args.config_dir)
    table, source = compare.compare_runs(run, reference, args.tolerance)
    differences = compare.configuration_differences(run, reference)
    if args.csv:
        write_csv(table, args.csv)
    print(f"{args.run} ({run.name}, {run.status}) against {args.reference} ({reference.status})")
    if differences:
        print(f"configurations differ (reference -> run): {'; '.join(differences)}")
    print(f"tolerance: {source}")
    if not table.empty:
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(compare.verdict(table, differences, compare.reference_diverged(run, reference)))


def _compare_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="a run's validation losses against a reference run's at every common evaluation "
        "step: difference and verdict against a tolerance",
    )
    p.add_argument("run", type=Path, help="a run directory (one in progress too)")
    p.add_argument(
        "--reference",
        type=Path,
        required=True,
        help="another run directory, an imported authors' run (repro import-authors-run) or "
        "audit log (repro import-audit-logs), one of the authors' out_config_* folders or one "
        "of the audit's loss logs, *.csv (imported on the fly)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        help="nats, a positive number (default: measured from the seeds of the run's experiment "
        "at its preset, else 0.01)",
    )
    p.add_argument("--csv", type=Path, help="also write the table here")
    options.add_config_dir(p)
    p.set_defaults(func=cmd_compare)


def add_commands(sub) -> None:
    for add in (
        _evaluate_parser,
        _import_parser,
        _authors_runs_parser,
        _authors_table_parser,
        _audit_parsers,
        _compare_parser,
    ):
        add(sub)
