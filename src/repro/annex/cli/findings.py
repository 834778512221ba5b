"""`repro findings`: docs/findings.md, the paper's claims against the public numbers at its scale
(repro.annex.findings), built from docs/findings.yaml."""

from __future__ import annotations

from pathlib import Path

from repro.config import options
from repro.errors import ReproError
from repro.files import atomic_write


def cmd_findings(args) -> None:
    from repro.annex import findings

    data = findings.load_findings(args.data)
    if args.audit_runs is not None:
        if not args.audit_runs.is_dir():
            raise ReproError(f"--audit-runs: {args.audit_runs} is not a folder")
        for line in findings.check_imported(data, args.audit_runs, args.data):
            print(f"checked {line}")
    page = findings.render(data, args.data, args.config_dir)
    if args.check:
        written = args.out.read_text() if args.out.is_file() else None
        if written != page:
            raise ReproError(f"{args.out} is not what {args.data} gives: run `repro findings`")
        print(f"{args.out} is up to date")
        return
    with atomic_write(args.out) as f:
        f.write(page)
    print(f"wrote {args.out}")


def add_commands(sub) -> None:
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
        "--out", type=Path, default=Path("docs/findings.md"), help="default docs/findings.md"
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
