"""results/evidence.csv: each of the paper's claims beside every source of evidence there is.

The package reproduces arXiv 2603.13381v1 (docs/specification.md); its claims are Table 1's
validation losses at step 59,000 and relative improvements over the baseline, as the
experiments file stores them (`paper:`). Beside each, one row per source the user has: the paper
(v1); our runs (seeds 0..N-1, a 95% t-interval where there are two or more); the authors'
imported runs; the audit's logs, those imported as our experiments (audit_runs) and those whose
stated configuration is the experiment's. Each run is read at the paper's step (the preset's
table step) and at its own end (its last evaluation: a schedule that decays to zero gains most
at its end); a source without the run says "not available". The later versions of the paper
(LATER_CLAIMS) changed the abstract's numbers; their table is not one the package has seen, so
they stand as claims with no source beside them.

Every row names the metrics.csv files its value comes from, and `verify_evidence` reads them
again and asserts each number, as the audit's own verify_writeup.py does for its write-up.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.curves import relative_improvement
from repro.analysis.results import scale_caveat
from repro.analysis.runs import Run, has_run, read_run
from repro.analysis.seeds import summarise
from repro.analysis.stated import stated_as, stated_differences
from repro.config import Preset, load_config, resolve_run, seed_dir
from repro.errors import ReproError
from repro.rundir import identity_differences

V1 = "arXiv 2603.13381v1"  # the version of the paper the package reproduces
PAPER = f"paper v1 ({V1})"
# The revisions' abstracts (relative improvement of the best nonlinear query over the baseline);
# v1's is Table 1's 1.40%. Their tables are not in the package: nothing is read beside them.
LATER_CLAIMS = [
    ("paper v2 (2026-04-24)", "validation log-loss", 0.0240),
    ("paper v2 (2026-04-24)", "perplexity", 0.0681),
    ("paper v3 (2026-05-26)", "validation log-loss", 0.0240),
    ("paper v3 (2026-05-26)", "perplexity", 0.0681),
]
NOT_AVAILABLE = "not available"
SEEDS = ("train.init_seed", "train.index_seed")  # what seed k's runs differ in from seed 0's
EVIDENCE_COLUMNS = [
    "claim",
    "experiment",
    "quantity",
    "source",
    "read_at",
    "step",
    "value",
    "ci_low",
    "ci_high",
    "n_seeds",
    "status",
    "config_differences",
    "files",
]  # then `caveat` (results.scale_caveat)


def _read(path: Path) -> Run | None:
    return read_run(path) if has_run(path) else None


def _sources(
    preset: Preset, experiments, runs_dir, seeds: int, authors_dir, audit_as_dir, audit_logs_dir
) -> dict[str, dict[str, dict[int, Run]]]:
    """source -> experiment -> {seed: run} of the runs there are."""
    names = list(experiments.by_name)
    ours = {
        n: {k: r for k in range(seeds) if (r := _read(Path(seed_dir(runs_dir, k)) / n))}
        for n in names
    }
    sources = {"ours": ours}
    for source, folder in (("authors", authors_dir), ("audit", audit_as_dir)):
        found = {n: {0: r} for n in names if folder and (r := _read(Path(folder) / n))}
        sources[source] = found  # empty: "not available" beside every claim
    if audit_logs_dir and Path(audit_logs_dir).is_dir():
        for log in sorted(p for p in Path(audit_logs_dir).iterdir() if has_run(p)):
            run = read_run(log)
            for name in stated_as(run.record, preset, experiments.by_name.values()):
                sources.setdefault(f"audit: {log.name}", {})[name] = {0: run}
    return sources


def _values(runs: dict[int, Run], baseline: dict[int, Run], quantity: str, step) -> dict:
    """Per seed, the value of `quantity` at `step` (None: each run's last finite evaluation)."""
    values = {}
    for k, run in runs.items():
        evaluated = run.evals().index
        if evaluated.empty:
            continue  # a run that has not evaluated yet
        at = int(evaluated.max()) if step is None else step
        loss = run.loss_at(at)
        if quantity == "rel_improvement":
            loss = (
                relative_improvement(loss, baseline[k].loss_at(at)) if k in baseline else math.nan
            )
        values[k] = (at, loss)
    return values


def _differences(run: Run, now: dict) -> list[str]:
    """What a run's recorded configuration differs in from its experiment's now (its seeds
    aside); for an audit log, from what its user stated, and what nobody stated."""
    if not run.record.identity:
        return stated_differences(run.record.data.get("stated", {}), now)
    recorded = identity_differences(run.record.identity, now)
    return [d for d in recorded if d.split(":")[0] not in SEEDS]


def _row(claim: dict, source: str, read_at: str, values: dict, runs, baseline, now) -> dict:
    found = {k: v for k, v in values.items() if not math.isnan(v[1])}
    files = [runs[k].path / "metrics.csv" for k in found]
    if claim["quantity"] == "rel_improvement":
        files += [baseline[k].path / "metrics.csv" for k in found]
    if not found:
        return claim | {"source": source, "read_at": read_at, "status": NOT_AVAILABLE}
    summary = summarise(
        pd.DataFrame({"v": [v for _, v in found.values()]}).groupby(lambda _: 0), "v"
    )
    steps = [s for s, _ in found.values()]  # per seed, in the order of `files`
    return claim | {
        "source": source,
        "read_at": read_at,
        "step": str(steps[0]) if len(set(steps)) == 1 else " ".join(map(str, steps)),
        "value": summary.at[0, "v_mean"],
        "ci_low": summary.at[0, "v_ci_low"],
        "ci_high": summary.at[0, "v_ci_high"],
        "n_seeds": len(found),
        "status": "; ".join(sorted({runs[k].status for k in found})),
        "config_differences": "; ".join(
            sorted({d for k in found for d in _differences(runs[k], now)})
        ),
        "files": " | ".join(map(str, files)),
    }


def evidence_table(
    runs_dir,
    preset: str | Preset,
    seeds: int = 1,
    config_dir=None,
    authors_runs_dir=None,
    audit_runs_dir=None,
    audit_logs_dir=None,
) -> pd.DataFrame:
    """The evidence table (EVIDENCE_COLUMNS) of Table 1's claims at `preset`."""
    preset, experiments = load_config(preset, config_dir)
    sources = _sources(
        preset, experiments, runs_dir, seeds, authors_runs_dir, audit_runs_dir, audit_logs_dir
    )
    paper_step = preset.report.table_step
    rows = []
    for e in experiments.group("table1"):
        quantities = ["val_loss"] + (["rel_improvement"] if e.name != experiments.baseline else [])
        for quantity in quantities:
            paper = getattr(e.paper, quantity) if e.paper else math.nan
            claim = {"claim": f"{e.name}: {quantity} {paper:g} at step 59000 ({V1})",
                     "experiment": e.name, "quantity": quantity}  # fmt: skip
            rows.append(claim | {"source": PAPER, "read_at": "the paper's step", "step": "59000",
                                 "value": paper, "status": "published",
                                 "files": str(experiments.source)})  # fmt: skip
            now = resolve_run(preset, e).identity()
            rows += _readings(claim, sources, experiments.baseline, paper_step, now)
    for source, measure, value in LATER_CLAIMS:
        claim = {"claim": f"abstract: {value:.2%} lower {measure} ({source})",
                 "experiment": "", "quantity": f"rel_improvement ({measure})"}  # fmt: skip
        rows.append(
            claim | {"source": source, "value": value, "status": "claimed; its table not seen"}
        )
    table = pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)
    table["caveat"] = scale_caveat(preset, config_dir)  # our runs at another scale test nothing
    return table


def _readings(claim: dict, sources: dict, baseline_name: str, paper_step: int, now) -> list[dict]:
    rows = []
    for source, by_name in sources.items():
        if source.startswith("audit: ") and claim["experiment"] not in by_name:
            continue  # a log stated to be another experiment
        runs, baseline = by_name.get(claim["experiment"], {}), by_name.get(baseline_name, {})
        for read_at, step in (("the paper's step", paper_step), ("its own end", None)):
            values = _values(runs, baseline, claim["quantity"], step)
            rows.append(_row(claim, source, read_at, values, runs, baseline, now))
    return rows


def verify_evidence(table: pd.DataFrame) -> list[str]:
    """Each number of an evidence table read again from the files it names: the mismatches."""
    failures = []
    for row in table.itertuples():
        if row.source == PAPER or not isinstance(row.files, str) or row.status == NOT_AVAILABLE:
            continue
        files = [Path(f) for f in row.files.split(" | ")]
        n = len(files) // (2 if row.quantity == "rel_improvement" else 1)
        steps = [int(float(s)) for s in str(row.step).split()]
        steps = steps * n if len(steps) == 1 else steps
        runs = [read_run(f.parent) for f in files]
        values = [
            r.loss_at(s)
            if row.quantity == "val_loss"
            else relative_improvement(r.loss_at(s), runs[i + n].loss_at(s))
            for i, (r, s) in enumerate(zip(runs[:n], steps))
        ]
        if not np.isclose(np.mean(values), row.value, rtol=0, atol=5e-7):
            failures.append(f"{row.claim}, {row.source}, {row.read_at}: the files say "
                            f"{np.mean(values):.6g}, the table {row.value:.6g}")  # fmt: skip
    return failures


def check_evidence(table: pd.DataFrame) -> None:
    failures = verify_evidence(table)
    if failures:
        raise ReproError(
            f"evidence: {len(failures)} numbers differ from their files: {failures[0]}"
        )
