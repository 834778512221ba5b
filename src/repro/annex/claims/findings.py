"""docs/findings.md: each claim of the paper beside the public numbers at its scale, a verdict,
and what would settle it at what cost, built from docs/findings.yaml by `repro findings`.

A published value is known only to the precision its source prints (2.915: +-0.0005), and
version 3's losses only to the range its two rounded percentages allow; a comparison is "ahead"
only where the whole of one range lies below the other, so rounding never decides a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from repro.config import load_config, resolve_run
from repro.config.schema import ConfigError, load

SCHEMA = "findings.schema.yaml"
COMMAND = "repro findings"
DATA = Path("docs/findings.yaml")
PAGE = Path("docs/findings.md")
VERDICTS = ("supported", "contradicted", "untested")


@dataclass(frozen=True)
class Loss:
    """A published or derived value and the range its rounding allows."""

    value: float
    low: float
    high: float
    text: str  # as the page states it


def decimals(entry: dict) -> int:
    """The decimals the source printed: `decimals`, else those of the value as written."""
    if "decimals" in entry:
        return entry["decimals"]
    written = repr(float(entry["value"]))
    return 0 if "e" in written else len(written.split(".")[1].rstrip("0"))


def stated(entry: dict) -> Loss:
    """A stated value; a gain is written as a percentage, with the decimals it was printed to."""
    d = decimals(entry)
    half = 0.5 * 10.0**-d
    value = entry["value"]
    text = f"{value:.{max(d - 2, 0)}%}" if entry["quantity"] != "val_loss" else f"{value:.{d}f}"
    return Loss(value, value - half, value + half, text)


def v3_pair(loss_gain: Loss, perplexity_gain: Loss) -> dict[str, Loss]:
    """The baseline's and the nonlinear query's losses that a loss gain and a perplexity gain
    fix together (docs/annex/v3.md): the gap is -ln(1 - perplexity gain), the baseline
    gap / gain."""
    gap = lambda p: -math.log(1 - p)
    baseline = lambda g, p: gap(p) / g
    nonlinear = lambda g, p: baseline(g, p) - gap(p)
    corners = [(g, p) for g in (loss_gain.low, loss_gain.high)
               for p in (perplexity_gain.low, perplexity_gain.high)]  # fmt: skip
    pair = {}
    for arm, f in (("baseline", baseline), ("nonlinear", nonlinear)):
        at = [f(g, p) for g, p in corners]  # monotone in each: the corners bound it
        value = f(loss_gain.value, perplexity_gain.value)
        text = f"{value:.3f} ({min(at):.3f} to {max(at):.3f})"
        pair[arm] = Loss(value, min(at), max(at), text)
    return pair


def values(data: dict, source: str) -> dict[str, Loss]:
    """Every value of the data file, derived ones computed."""
    found = {k: stated(v) for k, v in data["values"].items() if "value" in v}
    for key, v in data["values"].items():
        if "derived" in v:
            d = v["derived"]
            for role in ("loss_gain", "perplexity_gain"):
                if data["values"].get(d[role], {}).get("quantity") != role or d[role] not in found:
                    raise ConfigError(
                        f"{source}: values.{key}.derived.{role}: {d[role]!r} is no stated {role}"
                    )
            found[key] = v3_pair(found[d["loss_gain"]], found[d["perplexity_gain"]])[d["arm"]]
    return found


def check(data: dict, source) -> None:
    """What the schema cannot say: every name refers to an entry, comparisons share a step."""
    for key, v in data["values"].items():
        if v["source"] not in data["sources"]:
            raise ConfigError(f"{source}: values.{key}.source: no source {v['source']!r}")
        if ("step" in v) == ("tokens" in v):
            raise ConfigError(f"{source}: values.{key}: give one of step and tokens")
    ids = [claim["id"] for claim in data["claims"]]
    for i, claim in enumerate(data["claims"]):
        if claim["id"] in ids[:i]:  # each claim is a section of the page, its id the anchor
            raise ConfigError(f"{source}: claims[{i}].id: {claim['id']!r} is an earlier claim's")
        for part in ("claimed", "tests"):
            for j, c in enumerate(claim[part]):
                _check_comparison(data, c, f"{source}: claims[{i}].{part}[{j}]")
        bracket = claim.get("bracket", {})
        for key in [bracket["value"], *bracket["between"]] if bracket else []:
            if key not in data["values"]:
                raise ConfigError(f"{source}: claims[{i}].bracket: no value {key!r}")
    for j, claim in enumerate(data.get("downstream", {}).get("claims", [])):
        if claim not in ids:
            raise ConfigError(f"{source}: downstream.claims[{j}]: no claim {claim!r}")


def _check_comparison(data: dict, comparison: dict, where: str) -> None:
    stated_gain = data["values"].get(comparison.get("stated", "v"), {})
    if "stated" in comparison and stated_gain.get("quantity") != "loss_gain":
        raise ConfigError(f"{where}.stated: {comparison['stated']!r} is no loss_gain")
    entries = []
    for role in ("ours", "reference"):
        entry = data["values"].get(comparison[role])
        if entry is None or entry["quantity"] != "val_loss":
            raise ConfigError(f"{where}.{role}: {comparison[role]!r} is no validation loss")
        entries.append(entry)
    if entries[0].get("step") is None or entries[0].get("step") != entries[1].get("step"):
        raise ConfigError(
            f"{where}: {comparison['ours']} and {comparison['reference']} are not at one step"
        )


def load_findings(path: str | Path = DATA) -> dict:
    data = load(Path(path), SCHEMA)
    check(data, path)
    return data


def standing(ours: Loss, reference: Loss) -> str:
    """'ahead' (ours lower beyond rounding), 'behind', or 'level' (the ranges overlap)."""
    if ours.high < reference.low:
        return "ahead"
    return "behind" if ours.low > reference.high else "level"


def verdict(standings: list[str]) -> str:
    """No independent comparison: untested; every one ahead: supported; else contradicted."""
    if not standings:
        return "untested"
    return "supported" if all(s == "ahead" for s in standings) else "contradicted"


def settle_cost(
    settle: dict, preset: str, config_dir=None, where: str = "settle"
) -> tuple[list[str], list, float]:
    """The runs `settle` names (a `group NAME` expanded), how the page names them, and their
    GPU-hours over its seeds, as `repro describe --seeds N` computes them (40% MFU of an H100)."""
    from repro.annex.perf import cost  # torch, to count parameters

    preset, experiments = load_config(preset, config_dir)
    names, shown = [], []
    for run in settle["runs"]:
        group = run.removeprefix("group ")
        known = experiments.groups if group != run else experiments.by_name
        if group not in known:
            kind = "group" if group != run else "experiment"
            raise ConfigError(f"{where}.runs: {group!r} is no {kind} of {experiments.source}")
        if group != run:
            members = [e.name for e in experiments.group(group)]
            names += members
            shown.append(f"group `{group}` ({len(members)} runs)")
        else:
            names.append(experiments[run].name)
            shown.append(f"`{run}`")
    names = list(dict.fromkeys(names))
    hours = sum(
        cost.describe(resolve_run(preset, experiments[n]), seeds=settle["seeds"])[
            "gpu_hours_all_seeds"
        ]
        for n in names
    )
    return names, shown, hours


def tokens_at(step: int, preset: str, config_dir=None) -> float:
    preset, experiments = load_config(preset, config_dir)
    return step * resolve_run(preset, experiments[experiments.baseline]).tokens_per_step


def _step_text(entry: dict, preset: str, config_dir) -> str:
    """A value's step, with the tokens it stands for; or the tokens its source counts."""
    if "tokens" in entry:
        return f"{entry['tokens'] / 1e9:.1f}B tokens"
    return f"{entry['step']:,} ({tokens_at(entry['step'], preset, config_dir) / 1e9:.1f}B tokens)"


def _source_text(data: dict, entry: dict) -> str:
    """Where a value was published: the paper's version and table, or repository, path, commit."""
    source = data["sources"][entry["source"]]
    if "repository" in source:
        path, _, rest = entry["where"].partition(", ")
        at = f"{source['repository']} `{path}` at `{source['commit'][:8]}`"
        return f"[{at}]({source['url']}){', ' + rest if rest else ''}"
    return f"[{source['version']}]({source['url']}), {entry['where']}"


def _comparison(data: dict, found: dict, c: dict) -> tuple[str, str]:
    """(standing, sentence) of `ours` against `reference`."""
    ours, reference = found[c["ours"]], found[c["reference"]]
    s = standing(ours, reference)
    gap = reference.value - ours.value
    step = data["values"][c["ours"]]["step"]
    claimed = f"; stated: {found[c['stated']].text}" if "stated" in c else ""
    return s, (
        f"{c['ours']} {ours.text} against {c['reference']} {reference.text} at step {step:,}: "
        f"{s} (gap {gap:+.4f} nats, {gap / reference.value:+.2%}{claimed})"
    )


def _bracket(data: dict, found: dict, bracket: dict, preset: str, config_dir) -> str:
    key, (a, b) = bracket["value"], bracket["between"]
    low, high = sorted((found[a], found[b]), key=lambda v: v.value)
    inside = found[key].high >= low.low and found[key].low <= high.high
    where = "lies between" if inside else "lies outside"
    entry = data["values"][key]
    at = f"step {_step_text(entry, preset, config_dir)}" if "step" in entry else "its tokens"
    return (
        f"{key} {found[key].text} at {at} {where} {a} "
        f"{found[a].text} and {b} {found[b].text}: "
        + ("in line with" if inside else "not in line with")
        + " a published curve of the same model and batch size"
    )


def assess(data: dict, source, config_dir=None) -> list[dict]:
    """Each claim with its comparisons' sentences, its verdict and its settling runs' cost."""
    found, preset = values(data, source), data["preset"]
    assessed = []
    for i, claim in enumerate(data["claims"]):
        claimed = [_comparison(data, found, c)[1] for c in claim["claimed"]]
        tests = [_comparison(data, found, c) for c in claim["tests"]]
        bracket = claim.get("bracket")
        where = f"{source}: claims[{i}].settle"
        names, shown, hours = settle_cost(claim["settle"], preset, config_dir, where)
        downstream = _downstream(data, claim, config_dir, where)
        assessed.append(
            claim
            | {
                "verdict": verdict([s for s, _ in tests]),
                "claimed_text": claimed,
                "tests_text": [t for _, t in tests],
                "bracket_text": bracket and _bracket(data, found, bracket, preset, config_dir),
                "settle_runs": names,
                "settle_shown": shown,
                "settle_hours": hours,
                "downstream": downstream,
            }
        )
    return assessed


def _downstream(data: dict, claim: dict, config_dir, where: str) -> dict | None:
    """Whether a listed claim's loss gain is matched downstream: untested, for no downstream score
    of these models is public at this scale; settled by the claim's own runs scored at the
    downstream section's seeds, costed as the claim is."""
    section = data.get("downstream")
    if not section or claim["id"] not in section["claims"]:
        return None
    settle = {"runs": claim["settle"]["runs"], "seeds": section["seeds"]}
    names, _, hours = settle_cost(settle, data["preset"], config_dir, where)
    _, experiments = load_config(data["preset"], config_dir)
    # The workflow's results/downstream.csv scores Table 1's runs; other runs, by hand.
    table1 = set(names) <= {e.name for e in experiments.group("table1")}
    return {"verdict": "untested", "tasks": section["tasks"], "seeds": section["seeds"],
            "runs": names, "hours": hours, "table1": table1}  # fmt: skip


def _why(claim: dict) -> str:
    if claim["verdict"] == "supported":
        return "every independent comparison is ahead beyond the values' rounding"
    if claim["verdict"] == "contradicted":
        return "an independent comparison is not ahead beyond the values' rounding"
    if claim["claimed"]:
        return "no independent source at this scale: the numbers are the claimant's own"
    return "no source at this scale"


def _referenced(data: dict, claim: dict) -> list[str]:
    """The values a claim's comparisons read, each followed by those it is derived from."""
    keys = [k for part in ("claimed", "tests") for c in claim[part] for k in c.values()]
    bracket = claim.get("bracket")
    keys += [bracket["value"], *bracket["between"]] if bracket else []
    derived = lambda k: data["values"][k].get("derived", {})
    keys = [k2 for k in keys for k2 in (k, *[derived(k)[r] for r in derived(k) if r != "arm"])]
    return list(dict.fromkeys(keys))


def render(data: dict, source, config_dir=None) -> str:
    """The page, as markdown."""
    preset, found = data["preset"], values(data, source)
    claims = assess(data, source, config_dir)
    lines = [
        "# Findings: the paper's claims against the public numbers at its scale",
        "",
        f"Built by `{COMMAND}` from [findings.yaml](findings.yaml), which keeps each number with "
        "where it was published; edit that file and run the command, never this page. The scale "
        f"is the paper's (preset `{preset}`). A value is known to the decimals its source "
        "prints; a comparison is ahead or behind only beyond that rounding, else level. A claim "
        "is **supported** where every comparison with an independent source is ahead, "
        "**contradicted** where one is not, and **untested** where there is none: one run "
        "against another, without seeds, at most points the way. What would settle it is "
        "costed as `repro describe --seeds N` costs it; over three seeds the claims check holds "
        "a claim only where its paired test survives Holm's correction over the claims checked "
        "together ([seeds.md](seeds.md)). A loss gain is **matched downstream** only where "
        "the same runs' task scores, paired seed by seed, move with it "
        "([annex/downstream.md](annex/downstream.md)): a lower loss need not carry to tasks.",
        "",
        "| claim | verdict | downstream | what would settle it |",
        "|---|---|---|---|",
    ]
    for c in claims:
        downstream = c["downstream"]["verdict"] if c["downstream"] else "not a loss gain"
        lines.append(
            f"| [{c['claim']}](#{c['id']}) | **{c['verdict']}** | {downstream} | "
            f"{len(c['settle_runs'])} runs x {c['settle']['seeds']} seeds: "
            f"{c['settle_hours']:.1f} GPU-hours |"
        )
    for c in claims:
        lines += _section(data, found, c, preset, config_dir)
    lines += ["", "## Sources", "", "| source | what | version or commit |", "|---|---|---|"]
    for key, s in data["sources"].items():
        at = f"`{s['commit']}`" if "commit" in s else s["version"]
        lines.append(f"| [{key}]({s['url']}) | {s['title']} | {at} |")
    return "\n".join(lines) + "\n"


def _section(data: dict, found: dict, c: dict, preset: str, config_dir) -> list[str]:
    lines = [
        "",
        f'<a id="{c["id"]}"></a>',
        f"## {c['claim']}",
        "",
        f"**{c['verdict'].capitalize()}**: {_why(c)}.",
        "",
    ]
    keys = _referenced(data, c)
    if keys:
        lines += ["| value | run | loss or gain | step | source |", "|---|---|---|---|---|"]
    for key in keys:
        entry = data["values"][key]
        lines.append(
            f"| {key} | {entry['run']} | {found[key].text} | "
            f"{_step_text(entry, preset, config_dir)} | {_source_text(data, entry)} |"
        )
    lines += [""] if keys else []
    lines += [f"- claimed: {t}" for t in c["claimed_text"]]
    lines += [f"- independent: {t}" for t in c["tests_text"]]
    lines += [f"- reference curve: {c['bracket_text']}"] if c["bracket_text"] else []
    lines += [f"- caveat: {t}" for t in c["caveats"]]
    runs = ", ".join(c["settle_shown"])
    lines += [
        "",
        f"What would settle it: {runs} at preset `{preset}`, {c['settle']['seeds']} seeds each "
        f"({c['settle']['why']}): **{c['settle_hours']:.1f} GPU-hours**.",
    ]
    return lines + (_downstream_lines(c["downstream"]) if c["downstream"] else [])


def _downstream_lines(d: dict) -> list[str]:
    tasks = ", ".join(d["tasks"])
    if d["table1"]:
        how = (
            f"`snakemake results/downstream.csv --config seeds={d['seeds']} "
            f"downstream_tasks='[{tasks}]'`, which scores every Table 1 run"
        )
    else:
        how = (
            "`repro downstream` of each run's checkpoint, seed k's into a `seed<k>/` folder, "
            "then `repro downstream-table --baseline` the claim's linear reference"
        )
    return [
        "",
        f"Matched downstream? **{d['verdict'].capitalize()} downstream**: no downstream score of "
        "these models is public at this scale. What would settle it: the same runs over "
        f"{d['seeds']} seeds scored on {tasks}, each paired with its reference of the same seed, "
        f"the difference with its interval over seeds as `results/downstream.csv` gives it "
        f"({how}): {len(d['runs'])} runs, **{d['hours']:.1f} GPU-hours** of training, and a "
        "scoring of each checkpoint.",
    ]


def build(data_path: str | Path = DATA, config_dir=None) -> str:
    return render(load_findings(data_path), data_path, config_dir)


def check_imported(data: dict, runs_dir: str | Path, source="findings") -> list[str]:
    """Each value of a repository whose file was imported as a run under `runs_dir` (`repro
    import-audit-logs --out DIR`: DIR/<preset>/<file name>/), re-read from it at its step; a
    value the import does not give is refused. What was checked, a line each."""
    from repro.analysis.runs import has_run, read_run

    checked = []
    for key, entry in data["values"].items():
        folder = Path(runs_dir) / data["preset"] / Path(entry["where"].split(", ")[0]).stem
        if "step" not in entry or "value" not in entry or not has_run(folder):
            continue
        read = read_run(folder).loss_at(entry["step"])
        if not abs(read - entry["value"]) <= 0.5 * 10.0 ** -decimals(entry):
            raise ConfigError(
                f"{source}: values.{key}: {entry['value']} at step {entry['step']}, but the "
                f"imported {folder} says {read:.6g}"
            )
        checked.append(f"{key}: {entry['value']} at step {entry['step']}, as {folder} says")
    return checked
