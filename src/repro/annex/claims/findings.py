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

import numpy as np

from repro.analysis.seeds import ALPHA, MIN_SEEDS_FOR_P
from repro.config import load_config, resolve_run
from repro.config.schema import ConfigError, load
from repro.files import read_json

SCHEMA = "findings.schema.yaml"
COMMAND = "repro findings"
DATA = Path("docs/findings.yaml")
PAGE = Path("docs/findings.md")
VERDICTS = ("supported", "contradicted", "untested")
MAX_SEEDS = 1000  # the most seeds a claim is sized to; a gap that needs more is said to


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


def check(data: dict, source, config_dir=None) -> None:
    """What the schema cannot say: every name refers to an entry, comparisons share a step, each
    number is finite and each step one of the preset's."""
    preset, _ = load_config(data["preset"], config_dir)
    last = preset.train.max_step + 1
    for key, v in data["values"].items():
        for j, name in enumerate([v["source"], *v.get("also_in", [])]):
            field = "source" if j == 0 else f"also_in[{j - 1}]"
            if name not in data["sources"]:
                raise ConfigError(f"{source}: values.{key}.{field}: no source {name!r}")
        if ("step" in v) == ("tokens" in v):
            raise ConfigError(f"{source}: values.{key}: give one of step and tokens")
        for field in ("value", "tokens"):
            if field in v and not math.isfinite(v[field]):
                raise ConfigError(f"{source}: values.{key}.{field}: {v[field]} is not finite")
        if v.get("step", 0) > last:
            raise ConfigError(
                f"{source}: values.{key}.step: {v['step']} is past preset {preset.name}'s last "
                f"step, {last}"
            )
        if v.get("schedule", "") and v["schedule"] not in data.get("schedules", {}):
            raise ConfigError(f"{source}: values.{key}.schedule: no schedule {v['schedule']!r}")
    for key, s in data.get("schedules", {}).items():
        if s["source"] not in data["sources"]:
            raise ConfigError(f"{source}: schedules.{key}.source: no source {s['source']!r}")
        if s["warmup_steps"] >= s["steps"] or s["min_lr"] > s["peak_lr"]:
            raise ConfigError(
                f"{source}: schedules.{key}: warm-up {s['warmup_steps']} of {s['steps']} "
                f"steps, rate {s['peak_lr']} to {s['min_lr']}: no cosine decay"
            )
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
        curve = {data["values"][k].get("schedule") for k in bracket.get("between", [])}
        if bracket and (len(curve) != 1 or None in curve):
            raise ConfigError(
                f"{source}: claims[{i}].bracket.between: not readings of one run's schedule"
            )
    for j, claim in enumerate(data.get("downstream", {}).get("claims", [])):
        if claim not in ids:
            raise ConfigError(f"{source}: downstream.claims[{j}]: no claim {claim!r}")
    floor = data["noise_floor"]
    if floor["source"] not in data["sources"]:
        raise ConfigError(f"{source}: noise_floor.source: no source {floor['source']!r}")
    if not math.isfinite(floor["std"]):  # the schema lets NaN and inf past its bounds
        raise ConfigError(f"{source}: noise_floor.std: {floor['std']} is not finite")


def _check_comparison(data: dict, comparison: dict, where: str) -> None:
    stated_gain = data["values"].get(comparison.get("stated", "v"), {})
    if "stated" in comparison and stated_gain.get("quantity") != "loss_gain":
        raise ConfigError(f"{where}.stated: {comparison['stated']!r} is no loss_gain")
    entries = []
    for role in ("ours", "reference"):
        entry = data["values"].get(comparison[role])
        if entry is None or entry["quantity"] != "val_loss":
            raise ConfigError(f"{where}.{role}: {comparison[role]!r} is no validation loss")
        if "tuning" not in entry:  # a gap means little without how hard each arm was tuned
            raise ConfigError(f"{where}.{role}: values.{comparison[role]} states no tuning")
        entries.append(entry)
    if entries[0].get("step") is None or entries[0].get("step") != entries[1].get("step"):
        raise ConfigError(
            f"{where}: {comparison['ours']} and {comparison['reference']} are not at one step"
        )


def load_findings(path: str | Path = DATA, config_dir=None) -> dict:
    data = load(Path(path), SCHEMA)
    check(data, path, config_dir)
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


def bench_report(data: dict, source) -> tuple[dict | None, Path | None]:
    """The measured throughputs the costs use (`cost.bench`, relative to the data file), checked
    as `repro describe --bench` checks them; (None, None) where the data names none."""
    from repro.annex.perf import cost

    if "cost" not in data:
        return None, None
    path = Path(source).parent / data["cost"]["bench"]
    try:
        report = read_json(path, ConfigError, "a `repro bench --json` report")
        cost.check_bench_report(report, path)
    except ConfigError as e:
        raise ConfigError(f"{source}: cost.bench: {e}") from None
    return report, path


def run_hours(run, seeds: int, bench: dict | None) -> tuple[float, str]:
    """GPU-hours of `seeds` seeds of a run, and their throughput's origin: as `repro describe
    --bench` states them, where the bench timed a like model; else at its assumed MFU.
    """
    from repro.annex.perf import cost

    try:
        described = cost.describe(run, bench=bench, seeds=seeds) if bench else None
    except ConfigError:  # the bench timed no model like it: the assumption, said on the page
        described = None
    described = described or cost.describe(run, seeds=seeds)
    return described["gpu_hours_all_seeds"], described["throughput_source"]


def settle_cost(
    settle: dict,
    preset: str,
    config_dir=None,
    where: str = "settle",
    bench: dict | None = None,
) -> tuple[list[str], list, float, dict[str, int]]:
    """The runs `settle` names (a `group NAME` expanded), how the page names them, their GPU-hours
    over its seeds as `repro describe --seeds N` computes them, and how many runs each origin of
    a throughput costed."""
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
    costed = [run_hours(resolve_run(preset, experiments[n]), settle["seeds"], bench) for n in names]
    origins: dict[str, int] = {}
    for _, origin in costed:
        origins[origin] = origins.get(origin, 0) + 1
    return names, shown, sum(h for h, _ in costed), origins


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
    also = "".join(
        f"; also [{data['sources'][k]['version']}]({data['sources'][k]['url']})"
        for k in entry.get("also_in", [])
    )
    return f"[{source['version']}]({source['url']}), {entry['where']}{also}"


def _comparison(data: dict, found: dict, c: dict) -> tuple[str, str]:
    """(standing, sentence) of `ours` against `reference`, with how hard each arm was tuned."""
    ours, reference = found[c["ours"]], found[c["reference"]]
    s = standing(ours, reference)
    gap = reference.value - ours.value
    step = data["values"][c["ours"]]["step"]
    claimed = f"; stated: {found[c['stated']].text}" if "stated" in c else ""
    points = [data["values"][c[role]]["tuning"]["points"] for role in ("ours", "reference")]
    tuned = f"tuned: best of {points[0]} against {points[1]} rate and weight-decay points"
    less = ", **against the less-tuned arm**" if less_tuned(data, c) else ""
    return s, (
        f"{c['ours']} {ours.text} against {c['reference']} {reference.text} at step {step:,}: "
        f"{s} (gap {gap:+.4f} nats, {gap / reference.value:+.2%}{claimed}; {tuned}{less})"
    )


def less_tuned(data: dict, c: dict) -> bool:
    """Whether the reference arm was the best of fewer rate and weight-decay points than ours."""
    points = lambda role: data["values"][c[role]]["tuning"]["points"]
    return points("reference") < points("ours")


def _bracket(data: dict, found: dict, claim: dict, preset: str, config_dir) -> str:
    """Whether the value lies on a published curve; what that can show (not under-trained) and
    what it cannot (tuned): the curve's run is mid-schedule where the preset's schedule ends.
    """
    bracket = claim["bracket"]
    key, (a, b) = bracket["value"], bracket["between"]
    low, high = sorted((found[a], found[b]), key=lambda v: v.value)
    inside = found[key].high >= low.low and found[key].low <= high.high
    where = "lies between" if inside else "lies outside"
    entry = data["values"][key]
    at = f"step {_step_text(entry, preset, config_dir)}" if "step" in entry else "its tokens"
    text = (
        f"{key} {found[key].text} at {at} {where} {a} {found[a].text} and {b} {found[b].text}, "
        "readings along one published run of the same model and batch size"
    )
    if not inside:
        return text + ": not in line with it"
    curve = curve_at_end(data, data["values"][a]["schedule"], preset, config_dir)
    width = high.value - low.value
    gaps = [found[c["reference"]].value - found[c["ours"]].value for c in claim["claimed"]]
    ratio = f", {width / max(gaps):.1f} times the claimed gap" if gaps and max(gaps) > 0 else ""
    return text + (
        f" ({curve['run']}): in line with it, so the baseline is not under-trained; it cannot "
        f"show that the baseline is tuned: where the preset's schedule ends "
        f"({curve['tokens'] / 1e9:.1f}B tokens) that run's rate is still "
        f"{curve['fraction']:.2f} of its peak, so its value there bounds from above a run whose "
        f"schedule ends there, and the window is {width:.3f} nats wide{ratio}"
    )


def curve_at_end(data: dict, name: str, preset: str, config_dir) -> dict:
    """A published run's schedule where the preset's schedule ends: its step, the tokens and
    its learning rate as a fraction of its peak (the package's cosine, repro.training.loop).
    """
    from repro.training.loop import Schedule

    s = data["schedules"][name]
    end = tokens_at(load_config(preset, config_dir)[0].train.decay_steps, preset, config_dir)
    step = end / s["tokens_per_step"]
    rate = Schedule(s["peak_lr"], s["min_lr"], s["warmup_steps"], s["steps"], "cosine")(step)
    source = data["sources"][s["source"]]
    run = (
        f"lr {_rate(s['peak_lr'])} cosine to {_rate(s['min_lr'])} over {s['steps']:,} steps after "
        f"{s['warmup_steps']:,} of warm-up, {s['tokens_per_step']:,} tokens a step: "
        f"[{source['repository']} `{s['where']}` at `{source['commit'][:8]}`]({source['url']})"
    )
    return {"tokens": end, "step": step, "fraction": rate / s["peak_lr"], "run": run}


def _rate(rate: float) -> str:
    """A learning rate as configurations write it: 6e-4."""
    mantissa, exponent = f"{rate:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def seeds_needed(gap: float, std: float, alpha: float, power: float) -> int | None:
    """The fewest paired seeds (at least MIN_SEEDS_FOR_P) at which a two-sided paired t-test at
    `alpha` finds `gap` with `power`, each seed's difference of two runs of per-run std `std`
    (sqrt(2) std: pairing by batch order can only narrow it); None past MAX_SEEDS. The power is
    the noncentral t's (scipy)."""
    from scipy import stats

    n = np.arange(MIN_SEEDS_FOR_P, MAX_SEEDS + 1)
    t = stats.t.ppf(1 - alpha / 2, n - 1)
    shift = abs(gap) / (math.sqrt(2) * std) * np.sqrt(n)
    # The far tail adds nothing, and scipy gives NaN for it where it is far below 1e-16.
    found = stats.nct.sf(t, n - 1, shift) + np.fmax(stats.nct.cdf(-t, n - 1, shift), 0)
    enough = np.flatnonzero(found >= power)
    return int(n[enough[0]]) if enough.size else None


def claim_gap(data: dict, found: dict, claim: dict) -> tuple[float, str] | None:
    """The gap a claim's settling study must resolve: its smallest, independent comparisons'
    where it has them, else its claimed ones; None where it has none."""
    comparisons = claim["tests"] or claim["claimed"]
    if not comparisons:
        return None
    gaps = [(found[c["reference"]].value - found[c["ours"]].value, c) for c in comparisons]
    gap, c = min(gaps, key=lambda g: abs(g[0]))
    return gap, f"{c['ours']} against {c['reference']}"


def assess(data: dict, source, config_dir=None) -> list[dict]:
    """Each claim with its comparisons' sentences, its verdict, the paired seeds that resolve its
    gap after Holm's correction over the claims with a gap, and its settling runs' cost.
    """
    found, preset = values(data, source), data["preset"]
    bench, _ = bench_report(data, source)
    floor = data["noise_floor"]
    gaps = [claim_gap(data, found, claim) for claim in data["claims"]]
    together = sum(g is not None for g in gaps)
    assessed = []
    for i, (claim, gap) in enumerate(zip(data["claims"], gaps)):
        claimed = [_comparison(data, found, c)[1] for c in claim["claimed"]]
        tests = [_comparison(data, found, c) for c in claim["tests"]]
        where = f"{source}: claims[{i}].settle"
        sized = gap and seeds_needed(gap[0], floor["std"], ALPHA / together, floor["power"])
        seeds = sized or (MAX_SEEDS if gap else claim["settle"]["seeds"])
        settle = claim["settle"] | {"seeds": seeds}
        names, shown, hours, origins = settle_cost(settle, preset, config_dir, where, bench)
        downstream = _downstream(data, claim, config_dir, where, bench)
        assessed.append(
            claim
            | {
                "verdict": verdict([s for s, _ in tests]),
                "claimed_text": claimed,
                "tests_text": [t for _, t in tests],
                "less_tuned": any(less_tuned(data, c) for c in claim["tests"] or claim["claimed"]),
                "bracket_text": claim.get("bracket")
                and _bracket(data, found, claim, preset, config_dir),
                "gap": gap,
                "together": together,
                "seeds": settle["seeds"],
                "sized": sized,
                "settle_runs": names,
                "settle_shown": shown,
                "settle_hours": hours,
                "settle_origins": origins,
                "downstream": downstream,
            }
        )
    return assessed


def _downstream(data: dict, claim: dict, config_dir, where: str, bench=None) -> dict | None:
    """Whether a listed claim's loss gain is matched downstream: untested, for no downstream score
    of these models is public at this scale; settled by the claim's own runs scored at the
    downstream section's seeds, costed as the claim is."""
    section = data.get("downstream")
    if not section or claim["id"] not in section["claims"]:
        return None
    settle = {"runs": claim["settle"]["runs"], "seeds": section["seeds"]}
    names, _, hours, _ = settle_cost(settle, data["preset"], config_dir, where, bench)
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
        "against another, without seeds, at most points the way. Each comparison says how many "
        "rate and weight-decay points each arm was the best of, and marks a gap measured only "
        "against the less-tuned arm (a gain shrinks once the baseline is tuned as hard). A loss "
        "gain is **matched downstream** only where the same runs' task scores, paired seed by "
        "seed, move with it ([annex/downstream.md](annex/downstream.md)): a lower loss need not "
        "carry to tasks.",
        "",
        *_seeds_lines(data, claims),
        "",
        *_cost_lines(data, source),
        "",
        "| claim | verdict | downstream | what would settle it |",
        "|---|---|---|---|",
    ]
    for c in claims:
        downstream = c["downstream"]["verdict"] if c["downstream"] else "not listed"
        mark = " (against the less-tuned arm)" if c["less_tuned"] else ""
        lines.append(
            f"| [{c['claim']}](#{c['id']}) | **{c['verdict']}**{mark} | {downstream} | "
            f"{len(c['settle_runs'])} runs x {_seeds_text(c)}: {_hours_text(c)} GPU-hours |"
        )
    for c in claims:
        lines += _section(data, found, c, preset, config_dir)
    lines += [
        "",
        "## Sources",
        "",
        "| source | what | version or commit |",
        "|---|---|---|",
    ]
    for key, s in data["sources"].items():
        at = f"`{s['commit']}`" if "commit" in s else s.get("version", "not pinned")
        lines.append(f"| [{key}]({s['url']}) | {s['title']} | {at} |")
    return "\n".join(lines) + "\n"


def _seeds_text(c: dict) -> str:
    more = "more than " if c["gap"] and not c["sized"] else ""
    return f"{more}{c['seeds']:,} seeds"


def _hours_text(c: dict) -> str:
    more = "more than " if c["gap"] and not c["sized"] else ""
    return f"{more}{c['settle_hours']:,.1f}"


def _seeds_lines(data: dict, claims: list[dict]) -> list[str]:
    floor = data["noise_floor"]
    source = data["sources"][floor["source"]]
    together = claims[0]["together"]
    return [
        f"**Seeds.** Each claim with a gap is sized by it: the fewest paired seeds (at least "
        f"{MIN_SEEDS_FOR_P}) at which a two-sided paired t-test finds its smallest gap with power "
        f"{floor['power']:g} at {ALPHA:g} / {together} = {ALPHA / together:.4f}, the strictest "
        f"level of Holm's correction over the {together} claims with a gap checked together "
        "(`repro claims`, [seeds.md](seeds.md)), each seed's difference of two runs having "
        f"sqrt(2) times a per-run std of {floor['std']:g}: [{source['repository']}]"
        f"({source['url']}) `{floor['where']}`, over {floor['runs']} runs ({floor['caveat']}); "
        "the package has no seeds at this preset to put in its place. A claim without a gap "
        "keeps the seeds its data file gives. The power is the noncentral t's (scipy).",
    ]


def _cost_lines(data: dict, source) -> list[str]:
    from repro.annex.perf.cost import H100_BF16_PEAK_FLOPS

    assumed = f"an assumed 40% MFU of {H100_BF16_PEAK_FLOPS / 1e12:.0f} TFLOP/s"
    report, path = bench_report(data, source)
    if report is None:
        return [f"**Costs.** `repro describe --seeds N` at {assumed}: no throughput measured."]
    timed = ", ".join(
        f"{r['experiment']} {r['tokens_per_s']:,.0f} tokens/s ({r['mfu']:.1%} MFU)"
        for r in report["fastest"]
    )
    page = data["cost"]["page"]
    return [
        f"**Costs.** `repro describe --seeds N --bench` of "
        f"[{Path(data['cost']['bench']).name}]({data['cost']['bench']}): the "
        f"throughputs {report['device']} measured ({timed}; {report['steps']} timed steps after "
        f"{report['warmup']} of warm-up, each model's fastest timing, without spread: "
        f"[{Path(page).name}]({page})); a model "
        "it timed at another MLP width at its measured FLOP rate, one it did not time at "
        f"{assumed}. Each claim says which costed its runs.",
    ]


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
        lines += [
            "| value | run | loss or gain | step | source |",
            "|---|---|---|---|---|",
        ]
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
    lines += [f"- tuning: {_tuning_text(data, c)}"] if keys and _tuning_text(data, c) else []
    lines += [f"- caveat: {t}" for t in c["caveats"]]
    runs = ", ".join(c["settle_shown"])
    costed = "; ".join(
        f"{n} run{'s' * (n != 1)}: {origin}" for origin, n in c["settle_origins"].items()
    )
    lines += [
        "",
        f"What would settle it: {runs} at preset `{preset}`, {_seeds_text(c)} each "
        f"({c['settle']['why']}; {_sizing_text(c)}): **{_hours_text(c)} GPU-hours** "
        f"({costed}).",
    ]
    return lines + (_downstream_lines(c["downstream"]) if c["downstream"] else [])


def _sizing_text(c: dict) -> str:
    if not c["gap"]:
        return "no gap to size the seeds by"
    gap, which = c["gap"]
    if not c["sized"]:
        return f"no {MAX_SEEDS:,} seeds resolve its gap of {gap:+.4f} nats ({which})"
    return f"the seeds that resolve its gap of {gap:+.4f} nats ({which})"


def _tuning_text(data: dict, c: dict) -> str:
    """Where each arm's count of tuned points comes from."""
    keys = [
        k
        for part in ("claimed", "tests")
        for cmp in c[part]
        for k in (cmp["ours"], cmp["reference"])
    ]
    tunings = {k: data["values"][k]["tuning"] for k in dict.fromkeys(keys)}
    said = [f"{k} best of {t['points']} ({t['where']})" for k, t in tunings.items()]
    return "; ".join(said)


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
