"""The claims' commands: `repro claims`, every claim the package checks with Holm's correction
over all of them (repro.annex.claims.joint); `repro evidence`, each of the paper's claims beside
every run that answers it (repro.annex.claims.evidence); and `repro findings`, docs/findings.md,
the paper's claims against the public numbers at its scale (repro.annex.claims.findings), built
from docs/findings.yaml."""

from __future__ import annotations

from pathlib import Path

from repro.config import options
from repro.errors import ReproError
from repro.files import atomic_write, write_csv


def cmd_claims(args) -> None:
    from repro.analysis.report import write_table_html
    from repro.annex.claims.joint import joint_claims

    options.check_positive(args, "seeds")
    runs = args.runs or Path("results/runs") / args.preset
    table = joint_claims(runs, args.preset, args.config_dir, seeds=args.seeds)
    write_csv(table, args.out)
    if args.html:
        write_table_html(table, args.html)
    held = int((table["holds"] == True).sum())  # noqa: E712 (None: untested)
    print(f"{args.out}: {len(table)} claims checked together, {held} hold")


def _claims_parser(sub) -> None:
    p = sub.add_parser(
        "claims",
        help="every claim the package checks (the text's, and those of the groups trained "
        "beside Table 1), with Holm's correction over all of them",
    )
    options.add_config(p, experiment=False)
    p.add_argument("--runs", type=Path, help="the runs (default: results/runs/<preset>)")
    p.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 to read (default 1)")
    p.add_argument("--out", type=Path, required=True, help="the CSV to write")
    p.add_argument("--html", type=Path, help="the table as HTML too (the report's page)")
    p.set_defaults(func=cmd_claims)


def cmd_evidence(args) -> None:
    from repro.analysis.report import write_table_html
    from repro.annex.claims import evidence

    runs = args.runs or Path("results/runs") / args.preset
    table = evidence.evidence_table(
        runs, args.preset, args.seeds, args.config_dir, args.authors_runs, args.audit_runs,
        args.audit_logs,
    )  # fmt: skip
    evidence.check_evidence(table)  # every number read again from its files
    write_csv(table, args.out)
    if args.html:
        write_table_html(table.drop(columns="files"), args.html, {"value": "{:.4f}"})
    shown = table[table["status"] != evidence.NOT_AVAILABLE]
    print(f"{args.out}: {len(table)} readings of the paper's claims, {len(shown)} available")


def cmd_findings(args) -> None:
    from repro.annex.claims import findings

    data = findings.load_findings(args.data, args.config_dir)
    if args.audit_runs is not None:
        if not args.audit_runs.is_dir():
            raise ReproError(f"--audit-runs: {args.audit_runs} is not a folder")
        for line in findings.check_imported(data, args.audit_runs, args.data):
            print(f"checked {line}")
    claims = findings.assess(data, args.data, args.config_dir)
    page = findings.render(data, args.data, args.config_dir)
    if args.check:
        if not same_text(args.out, page.encode()):
            raise ReproError(f"{args.out} is not what {args.data} gives: run `repro findings`")
        print(f"{args.out} is up to date")
    else:
        with atomic_write(args.out) as f:
            f.write(page)
        print(f"wrote {args.out}")
    for c in claims:
        print(f"{c['verdict']}: {c['id']} ({c['claim']})")


CHUNK = 1 << 20


def same_text(path: Path, text: bytes) -> bool:
    """Whether a regular file holds exactly `text`, read a chunk at a time (it may be huge)."""
    if not path.is_file() or path.stat().st_size != len(text):
        return False
    with open(path, "rb") as f:
        for start in range(0, len(text), CHUNK):
            if f.read(CHUNK) != text[start : start + CHUNK]:
                return False
    return True


def _evidence_parser(sub) -> None:
    p = sub.add_parser(
        "evidence",
        help="each of the paper's (v1) claims beside our runs, the authors' and the audit's, "
        "at the paper's step and at each run's end, every number checked against its file",
    )
    options.add_config(p, experiment=False)
    p.add_argument("--runs", type=Path, help="our runs (default: results/runs/<preset>)")
    p.add_argument("--seeds", type=int, default=1, help="our seeds 0..N-1 to read (default 1)")
    p.add_argument("--authors-runs", type=Path, help="the authors' runs imported at the preset")
    p.add_argument("--audit-runs", type=Path, help="the audit's logs imported as experiments")
    p.add_argument(
        "--audit-logs",
        type=Path,
        help="the audit's logs imported at the preset (OUT/<preset> of import-audit-logs); "
        "those whose configuration was stated stand beside the experiments they are",
    )
    p.add_argument("--out", type=Path, required=True, help="the CSV to write")
    p.add_argument("--html", type=Path, help="the table as HTML too (the report's page)")
    p.set_defaults(func=cmd_evidence)


def _findings_parser(sub) -> None:
    p = sub.add_parser(
        "findings",
        help="docs/findings.md: each claim of the paper beside the public numbers at its scale, "
        "a verdict, and the GPU-hours that would settle it, built from docs/findings.yaml",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=Path("docs/findings.yaml"),
        help="the published numbers and claims (default docs/findings.yaml)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("docs/findings.md"),
        help="default docs/findings.md",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing: fail where --out differs from what --data gives",
    )
    p.add_argument(
        "--audit-runs",
        type=Path,
        help="the audit's logs as `repro import-audit-logs --out DIR` imported them: each value "
        "of a log found there is re-read from it, and a value it does not give is refused",
    )
    options.add_config_dir(p)
    p.set_defaults(func=cmd_findings)


def add_commands(sub) -> None:
    _claims_parser(sub)
    _evidence_parser(sub)
    _findings_parser(sub)
