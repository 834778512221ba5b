"""`repro compare RUN --reference REF`: is a run on course (repro.analysis.compare)?"""

from __future__ import annotations

import tempfile
from pathlib import Path

from repro import config
from repro.config import options
from repro.files import write_csv


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


def add_commands(sub) -> None:
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
