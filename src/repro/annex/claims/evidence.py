"""results/evidence.csv: each of the paper's claims beside every source (docs/annex/authors.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.curves import relative_improvement
from repro.analysis.results import scale_caveat
from repro.analysis.runs import Run, has_run, read_run
from repro.analysis.seeds import check_seed_count, summarise
from repro.analysis.stated import ambiguity, stated_as, stated_differences
from repro.annex.claims.joint import joint_claims
from repro.config import Preset, load_config, resolve_run, seed_dir
from repro.errors import ReproError
from repro.rundir import identity_differences

V1 = "arXiv 2603.13381v1"  # the version of the paper the package reproduces
PAPER = f"paper v1 ({V1})"
# Version 2's abstract (v1's is 1.40%): nothing is read beside it.
LATER_CLAIMS = [
    ("paper v2 (2026-04-24)", "validation log-loss", 0.0240),
    ("paper v2 (2026-04-24)", "perplexity", 0.0681),
]
# Version 3's at step 60,000 (docs/specification.md §4.4): gap -ln(1 - 0.0681) = 0.0705 nats.
V3 = "paper v3 (2026-05-26)"
DERIVED = f"{V3}, derived from its abstract's 2.40% and 6.81%"
V3_CLAIMS = [  # (experiment, quantity, value, source)
    ("baseline", "val_loss", 2.939, DERIVED),
    ("v3-resgelu-wd0.1-lr3.6e-3", "val_loss", 2.868, DERIVED),
    ("v3-resgelu-wd0.1-lr3.6e-3", "rel_improvement", 0.0240, f"{V3}, its abstract"),
]
VERDICTS = {True: "holds", False: "does not hold", None: "not answered"}
NOT_AVAILABLE = "not available"
SEEDS = ("train.init_seed", "train.index_seed")  # what seed k's runs differ in from seed 0's
EVIDENCE_COLUMNS = (
    "claim experiment quantity source read_at step value ci_low "
    "ci_high n_seeds status detail config_differences files"
).split()  # then `caveat` (results.scale_caveat)
# A run is read at its preset's table step (report.table_step): 59000 at the paper preset alone.
TABLE_STEP = "the preset's table step"


def _read(path: Path, source: str = "repro") -> Run | None:
    """The run at `path` if any; one of another source than `source` is refused."""
    if not has_run(path):
        return None
    run = read_run(path)
    if run.record.source != source:
        raise ReproError(
            f"{path}: a run of source {run.record.source!r} (run.json), not {source!r}: give "
            f"each option the folder of its own runs"
        )
    return run


def _folder(path, option: str) -> Path | None:
    """A folder an option names (None: not given); a file or missing folder is an error."""
    if path is not None and not Path(path).is_dir():
        raise ReproError(f"{option}: {path} is not a folder")
    return path and Path(path)


def _sources(
    preset: Preset, experiments, seeds: int, runs_dir, authors_dir, audit_as_dir, audit_logs_dir
) -> tuple[dict[str, dict[str, dict[int, Run]]], dict]:
    """source -> experiment -> {seed: run}, and what was left out (copies, ambiguous logs)."""
    names, flags = list(experiments.by_name), {}
    ours = {n: {} for n in names}
    for k in range(seeds):
        for n in names:
            run = _read(Path(seed_dir(runs_dir, k)) / n)
            wrong = _other_seed(run, preset, k) if run else []
            if wrong:
                flags.setdefault(("ours", n), []).append(f"seed{k} left out: {', '.join(wrong)}")
            elif run:
                ours[n][k] = run
    sources = {"ours": ours}
    for source, folder in (("authors", authors_dir), ("audit", audit_as_dir)):
        found = {n: {0: r} for n in names if folder and (r := _read(folder / n, source))}
        sources[source] = found  # empty: "not available" beside every claim
    logs = sorted(p for p in audit_logs_dir.iterdir() if has_run(p)) if audit_logs_dir else []
    for log in logs:
        run = _read(log, "audit")
        matches = stated_as(run.record, preset, experiments.by_name.values())
        for name in matches:
            sources.setdefault(f"audit: {log.name}", {})[name] = {0: run}
            flags[(f"audit: {log.name}", name)] = ambiguity(matches)
    return sources, flags


def _other_seed(run: Run, preset: Preset, k: int) -> list[str]:
    """Where a run in seed k's folder records another seed (a copy), "key: recorded -> seed k's"."""
    recorded, seeded = run.record.identity.get("train", {}), preset.with_seed(k).train
    return [
        f"{key}: {recorded.get(key.split('.')[1])} -> {getattr(seeded, key.split('.')[1])}"
        for key in SEEDS
        if recorded.get(key.split(".")[1]) != getattr(seeded, key.split(".")[1])
    ]


def _values(runs: dict[int, Run], baseline: dict[int, Run], quantity: str, step) -> dict:
    """Per seed, `quantity` at `step` (None: each run's last finite evaluation)."""
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
    """What a run differs in from its experiment now (an audit log: from its user's statement)."""
    if not run.record.identity:
        return stated_differences(run.record.data.get("stated", {}), now)
    recorded = identity_differences(run.record.identity, now)
    return [d for d in recorded if d.split(":")[0] not in SEEDS]


def _row(claim: dict, source: str, read_at: str, values: dict, runs, baseline, nows, notes):
    """One reading, with what its runs and its baseline's differ in, then `notes`."""
    found = {k: v for k, v in values.items() if not math.isnan(v[1])}
    files = [runs[k].path / "metrics.csv" for k in found]
    if claim["quantity"] == "rel_improvement":
        files += [baseline[k].path / "metrics.csv" for k in found]
    if not found:
        return claim | {"source": source, "read_at": read_at, "status": NOT_AVAILABLE,
                        "config_differences": "; ".join(notes) or None}  # fmt: skip
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
            _all_differences(claim, found, runs, baseline, nows) + notes
        ),
        "files": " | ".join(map(str, files)),
    }


def _all_differences(claim: dict, found: dict, runs, baseline, nows) -> list[str]:
    differences = sorted({d for k in found for d in _differences(runs[k], nows[0])})
    if claim["quantity"] != "rel_improvement":
        return differences
    name = baseline[next(iter(found))].name
    theirs = sorted({d for k in found for d in _differences(baseline[k], nows[1])})
    return differences + [f"divided by {name}'s loss"] + [f"{name}: {d}" for d in theirs]


def evidence_table(
    runs_dir,
    preset: str | Preset,
    seeds: int = 1,
    config_dir=None,
    authors_runs_dir=None,
    audit_runs_dir=None,
    audit_logs_dir=None,
) -> pd.DataFrame:
    """The evidence table (EVIDENCE_COLUMNS) of the claims at `preset`, then their verdicts."""
    preset, experiments = load_config(preset, config_dir)
    check_seed_count(seeds)
    folders = [_folder(runs_dir, "--runs"), _folder(authors_runs_dir, "--authors-runs")]
    folders += [_folder(audit_runs_dir, "--audit-runs"), _folder(audit_logs_dir, "--audit-logs")]
    sources, flags = _sources(preset, experiments, seeds, *folders)
    baseline_now = resolve_run(preset, experiments[experiments.baseline]).identity()
    published = [(e.name, q, getattr(e.paper, q) if e.paper else math.nan, PAPER, 59000, V1)
                 for e in experiments.group("table1") for q in ("val_loss", "rel_improvement")
                 if e.name != experiments.baseline or q == "val_loss"]  # fmt: skip
    published += [(*c, 60000, V3) for c in V3_CLAIMS if c[0] in experiments.by_name]
    read = (sources, flags, experiments.baseline, preset.report.table_step, baseline_now)
    rows = []
    for name, quantity, value, source, step, version in published:
        claim = {"claim": f"{name}: {quantity} {value:g} at step {step} ({version})",
                 "experiment": name, "quantity": quantity}  # fmt: skip
        rows.append(claim | {"source": source, "read_at": "the paper's step", "step": str(step),
                             "value": value, "status": "published",
                             "files": str(experiments.source)})  # fmt: skip
        rows += _readings(claim, resolve_run(preset, experiments[name]).identity(), *read)
    for source, measure, value in LATER_CLAIMS:
        claim = {"claim": f"abstract: {value:.2%} lower {measure} ({source})",
                 "experiment": "", "quantity": f"rel_improvement ({measure})"}  # fmt: skip
        rows.append(
            claim | {"source": source, "value": value, "status": "claimed; its table not seen"}
        )
    checked = joint_claims(runs_dir, preset, config_dir, seeds=seeds)
    read_above = {name for name, *_ in published}  # beside the published claims
    others = ({s: runs for s, runs in sources.items() if s != "ours"}, *read[1:])
    for group, verdicts in checked.groupby("group", sort=False):
        rows += [{"claim": c.claim, "experiment": c.experiment, "quantity": "verdict",
                  "source": "ours", "status": VERDICTS[c.holds], "detail": c.detail}
                 for c in verdicts.itertuples()]  # fmt: skip
        for e in [e for e in experiments.group(group) if e.name not in read_above]:
            claim = {"claim": f"group {group}: {e.name}", "experiment": e.name,
                     "quantity": "val_loss"}  # fmt: skip
            readings = _readings(claim, resolve_run(preset, e).identity(), *others)
            rows += [r for r in readings if r["status"] != NOT_AVAILABLE]
    table = pd.DataFrame(rows, columns=EVIDENCE_COLUMNS)
    table["caveat"] = scale_caveat(preset, config_dir)  # our runs at another scale test nothing
    return table


def _readings(claim, now, sources, flags, baseline_name, paper_step, baseline_now) -> list:
    """A claim's readings from each source, at the table step and at the run's end."""
    rows, nows = [], (now, baseline_now)
    for source, by_name in sources.items():
        if source.startswith("audit: ") and claim["experiment"] not in by_name:
            continue  # a log stated to be another experiment
        runs, baseline = by_name.get(claim["experiment"], {}), by_name.get(baseline_name, {})
        notes = flags.get((source, claim["experiment"]), [])
        if claim["quantity"] == "rel_improvement":
            notes = list(dict.fromkeys(notes + flags.get((source, baseline_name), [])))
        for read_at, step in ((TABLE_STEP, paper_step), ("its own end", None)):
            values = _values(runs, baseline, claim["quantity"], step)
            rows.append(_row(claim, source, read_at, values, runs, baseline, nows, notes))
    return rows


def verify_evidence(table: pd.DataFrame) -> list[str]:
    """Each number re-read from its files (each once: a metrics.csv can be 100 MB): mismatches."""
    failures, read = [], {}
    for row in table.itertuples():
        if row.status in ("published", NOT_AVAILABLE) or not isinstance(row.files, str):
            continue
        files = [Path(f) for f in row.files.split(" | ")]
        n = len(files) // (2 if row.quantity == "rel_improvement" else 1)
        steps = [int(float(s)) for s in str(row.step).split()]
        steps = steps * n if len(steps) == 1 else steps
        runs = [read.get(f.parent) or read.setdefault(f.parent, read_run(f.parent)) for f in files]
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
