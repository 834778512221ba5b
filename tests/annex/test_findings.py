"""docs/findings.md is what `repro findings` builds from docs/findings.yaml, and every number it
states is the data file's, or arithmetic on it recomputed here, or a cost as `repro describe`
states it: a number of the page that none of these accounts for fails the test."""

from __future__ import annotations

import json
import math
import os
import re
import shutil

import pytest
from audit_helpers import write_log
from conftest import REPO

from repro.cli.assembly import main
from repro.config.schema import parse_yaml

DATA, PAGE = REPO / "docs" / "findings.yaml", REPO / "docs" / "findings.md"
TOKENS_PER_STEP = 480 * 1024  # the paper's batch (docs/specification.md §2)
# A number of the prose: not inside a word, a code span or a link's address.
NUMBER = re.compile(r"(?<![\w.^-])[+-]?\d(?:[\d,]*\d)?(?:\.\d+)?(?:%|B)?(?![\w^]|[.,]\d)")


def raw() -> dict:
    return parse_yaml(DATA.read_bytes())


def literal(key: str) -> str:
    """A value as the data file writes it (its decimals are its precision)."""
    line = next(line for line in DATA.read_text().splitlines() if line.strip() == f"{key}:")
    after = DATA.read_text().split(line, 1)[1]
    return re.search(r"\bvalue: ([0-9.e+-]+),", after).group(1)


def shown(key: str, quantity: str) -> str:
    text = literal(key)
    if quantity == "val_loss":
        return text
    return f"{float(text) * 100:.{max(len(text.split('.')[1]) - 2, 0)}f}%"


def v3_losses(data: dict) -> dict[str, tuple[float, float, float]]:
    """Version 3's pair from its two percentages, with the corners their rounding allows."""
    g, p = (data["values"][k]["value"] for k in ("v3-loss-gain", "v3-perplexity-gain"))
    pair = {}
    for arm in ("baseline", "nonlinear"):
        f = lambda g, p: -math.log(1 - p) / g - (arm == "nonlinear") * -math.log(1 - p)
        corners = [f(g + a, p + b) for a in (-5e-5, 5e-5) for b in (-5e-5, 5e-5)]
        pair[arm] = (f(g, p), min(corners), max(corners))
    return pair


def page_rows(text: str) -> dict[str, str]:
    return {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ")}


def prose_numbers(text: str) -> list[str]:
    text = re.sub(r"`[^`]*`", "", text)  # code: names of experiments, commands, commits
    text = re.sub(r"\]\([^)]*\)", "]", re.sub(r'<a id="[^"]*"></a>', "", text))
    text = re.sub(r"\(#[^)]*\)", "", text)
    return NUMBER.findall(text)


def test_the_committed_page_is_what_the_command_builds(tmp_path, capsys):
    out = tmp_path / "findings.md"
    assert main(["findings", "--data", str(DATA), "--out", str(out)]) == 0
    assert out.read_text() == PAGE.read_text()
    assert main(["findings", "--data", str(DATA), "--out", str(PAGE), "--check"]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_check_fails_on_a_page_edited_by_hand(tmp_path, capsys):
    edited = tmp_path / "findings.md"
    edited.write_text(PAGE.read_text().replace("2.8948", "2.8800"))
    assert main(["findings", "--data", str(DATA), "--out", str(edited), "--check"]) == 2
    assert "is not what" in capsys.readouterr().err


def measured() -> dict:
    """The bench report the data file names, as `repro bench --json` wrote it."""
    return json.loads((DATA.parent / raw()["cost"]["bench"]).read_text())


def hours_of(run, seeds: int) -> float:
    """GPU-hours as `repro describe --bench` states them, else at its default MFU."""
    from repro.annex.perf.cost import describe
    from repro.config.schema import ConfigError

    try:
        return describe(run, bench=measured(), seeds=seeds)["gpu_hours_all_seeds"]
    except ConfigError:  # a model the bench did not time
        return describe(run, seeds=seeds)["gpu_hours_all_seeds"]


def paired_power(gap: float, std: float, alpha: float, n: int) -> float:
    """A two-sided paired t-test's power over n seeds, each difference of std sqrt(2) std."""
    from scipy import stats

    t = stats.t.ppf(1 - alpha / 2, n - 1)
    return stats.nct.sf(t, n - 1, abs(gap) / (math.sqrt(2) * std) * math.sqrt(n))


def said(s: str, where: str, expected: set) -> None:
    """`s` is on the page, and its numbers are accounted for."""
    assert s in where, f"{s!r} not in {where!r}"
    expected.update(prose_numbers(s))


def test_every_number_the_page_states_is_the_datas():
    from repro.config import load_config, resolve_run

    data, text = raw(), PAGE.read_text()
    rows, expected = page_rows(text), set()
    pair = v3_losses(data)
    say = lambda s, where: said(s, where, expected)  # noqa: E731
    floor = data["noise_floor"]
    with_gap = [c for c in data["claims"] if c.get("tests") or c["claimed"]]
    level = 0.05 / len(with_gap)  # Holm's strictest over the claims with a gap
    say(f"power {floor['power']} at 0.05 / {len(with_gap)} = {level:.4f}", text)
    say(f"per-run std of {floor['std']}", text)
    say(f"over {floor['runs']} runs ({floor['caveat']})", text)
    expected.update({"3", "2"})  # at least 3 seeds (a t-test's), sqrt(2)
    for r in measured()["fastest"]:
        say(
            f"{r['experiment']} {r['tokens_per_s']:,.0f} tokens/s ({r['mfu']:.1%} MFU)",
            text,
        )
    say(
        f"{measured()['steps']} timed steps after {measured()['warmup']} of warm-up",
        text,
    )
    say("an assumed 40% MFU of 989 TFLOP/s", text)

    loss = {}
    for key, v in data["values"].items():
        if "derived" in v:
            value, low, high = pair[v["derived"]["arm"]]
            say(f"{value:.3f} ({low:.3f} to {high:.3f})", rows[key])
            expected.update({f"{value:.3f}", f"{low:.3f}", f"{high:.3f}"})
            loss[key] = (value, low, high)
        else:
            say(shown(key, v["quantity"]), rows[key])
            d = len(literal(key).split(".")[1])
            loss[key] = (
                v["value"],
                v["value"] - 0.5 * 10**-d,
                v["value"] + 0.5 * 10**-d,
            )
        if "step" in v:
            say(
                f"{v['step']:,} ({v['step'] * TOKENS_PER_STEP / 1e9:.1f}B tokens)",
                rows[key],
            )
            expected.update({f"{v['step']:,}", f"{v['step'] * TOKENS_PER_STEP / 1e9:.1f}B"})
        else:
            say(f"{v['tokens'] / 1e9:.1f}B tokens", rows[key])
            expected.add(f"{v['tokens'] / 1e9:.1f}B")
        say(data["sources"][v["source"]].get("commit", "")[:8], rows[key])
    preset, experiments = load_config("paper")
    verdicts = {}
    for claim in data["claims"]:
        section = text.split(f'<a id="{claim["id"]}"></a>')[1].split("<a id=")[0]
        gaps = []
        for part in ("claimed", "tests"):
            for c in claim.get(part, []):
                ours, ref = loss[c["ours"]], loss[c["reference"]]
                gap = ref[0] - ours[0]
                say(f"gap {gap:+.4f} nats, {gap / ref[0]:+.2%}", section)
                expected.update({f"{gap:+.4f}", f"{gap / ref[0]:+.2%}"})
                if "stated" in c:
                    expected.add(shown(c["stated"], "loss_gain"))
                points = [data["values"][c[r]]["tuning"]["points"] for r in ("ours", "reference")]
                less = ", **against the less-tuned arm**" if points[1] < points[0] else ")"
                say(
                    f"best of {points[0]} against {points[1]} rate and weight-decay points{less}",
                    section,
                )
                if part == ("tests" if claim.get("tests") else "claimed"):
                    gaps.append(gap)
        seeds = claim["settle"]["seeds"]
        if gaps:  # the fewest seeds at which the smallest gap is found with the stated power
            gap = min(gaps, key=abs)
            seeds = next(
                n
                for n in range(3, 1001)
                if paired_power(gap, floor["std"], level, n) >= floor["power"]
            )
            assert seeds == 3 or paired_power(gap, floor["std"], level, seeds - 1) < floor["power"]
            say(f"{seeds:,} seeds each (", section)
            say(f"the seeds that resolve its gap of {gap:+.4f} nats", section)
        else:
            say(f"{seeds} seeds each (", section)
        claim = claim | {"settle": claim["settle"] | {"seeds": seeds}}
        standings = [
            "ahead" if loss[c["ours"]][2] < loss[c["reference"]][1] else "not ahead"
            for c in claim.get("tests", [])
        ]
        verdicts[claim["id"]] = (
            "untested"
            if not standings
            else "supported"
            if set(standings) == {"ahead"}
            else "contradicted"
        )
        assert f"**{verdicts[claim['id']].capitalize()}**" in section
        names = [
            n
            for run in claim["settle"]["runs"]
            for n in (
                [e.name for e in experiments.group(run[6:])] if run.startswith("group ") else [run]
            )
        ]
        hours = sum(
            hours_of(resolve_run(preset, experiments[n]), claim["settle"]["seeds"]) for n in names
        )
        say(f"**{hours:,.1f} GPU-hours**", section)
        say(
            f"{len(names)} runs x {claim['settle']['seeds']:,} seeds: {hours:,.1f} GPU-hours",
            text,
        )
        expected.update({str(len(names)), str(claim["settle"]["seeds"])})
        costed = section.split(" GPU-hours** (")[1].split(").\n")[0]  # runs per throughput
        counts = [int(n) for n in re.findall(r"(?:^|; )(\d+) runs?: ", costed)]
        assert sum(counts) == len(names), costed
        expected.update(map(str, counts))
        for group in (r[6:] for r in claim["settle"]["runs"] if r.startswith("group ")):
            expected.add(str(len(experiments.group(group))))
        downstream = data["downstream"]
        row = next(line for line in text.splitlines() if f"](#{claim['id']}) |" in line)
        if claim["id"] not in downstream["claims"]:
            assert "| not listed |" in row and "Matched downstream" not in section
            continue
        # untested downstream: its runs at the downstream seeds, costed as the claim is
        hours = sum(
            hours_of(resolve_run(preset, experiments[n]), downstream["seeds"]) for n in names
        )
        assert "| untested |" in row and "**Untested downstream**" in section
        say(
            f"over {downstream['seeds']} seeds scored on {', '.join(downstream['tasks'])}",
            section,
        )
        say(f"{len(names)} runs, **{hours:.1f} GPU-hours** of training", section)
        table1 = {e.name for e in experiments.group("table1")}
        say(
            ("results/downstream.csv --config" if set(names) <= table1 else "repro downstream"),
            section,
        )
        expected.update({f"{hours:.1f}", str(downstream["seeds"])})
    # The reference curve: a run mid-schedule where the paper's ends (cosine after warm-up).
    mars = data["schedules"]["mars-adamw"]
    end = preset.train.decay_steps * TOKENS_PER_STEP
    progress = (end / mars["tokens_per_step"] - mars["warmup_steps"]) / (
        mars["steps"] - mars["warmup_steps"]
    )
    rate = (
        mars["min_lr"] + (mars["peak_lr"] - mars["min_lr"]) * (1 + math.cos(math.pi * progress)) / 2
    )
    assert round(rate / mars["peak_lr"], 2) == 0.39  # as the published configuration gives it
    say(
        f"({end / 1e9:.1f}B tokens) that run's rate is still {rate / mars['peak_lr']:.2f}",
        text,
    )
    width = loss["mars-adamw-20b"][0] - loss["mars-adamw-50b"][0]
    gap = loss["v1-baseline"][0] - loss["v1-nonlinear"][0]
    say(
        f"the window is {width:.3f} nats wide, {width / gap:.1f} times the claimed gap",
        text,
    )
    say(
        f"over {mars['steps']:,} steps after {mars['warmup_steps']:,} of warm-up, "
        f"{mars['tokens_per_step']:,} tokens a step",
        text,
    )
    # Verdicts a reader would reach from these numbers by hand.
    assert verdicts["d2z-v1"] == "contradicted" and verdicts["d2z-v3"] == "supported"
    # The prose the data file writes (claims, runs, caveats) states its own numbers.
    written = " ".join(
        str(x)
        for part in (
            data["values"].values(),
            data["claims"],
            data["sources"].values(),
            [floor],
        )
        for entry in part
        for x in (entry.values() if isinstance(entry, dict) else [entry])
    )
    expected |= set(prose_numbers(written))
    unaccounted = sorted(set(prose_numbers(text)) - expected)
    assert not unaccounted, f"numbers of the page that the data does not give: {unaccounted}"


def test_the_papers_version_1_values_are_config_experiments_yamls():
    from repro.config import load_config

    _, experiments = load_config("paper")
    for key, v in raw()["values"].items():
        if v["source"] == "paper-v1":
            paper = experiments[v["experiment"]].paper
            field = {"val_loss": "val_loss", "loss_gain": "rel_improvement"}[v["quantity"]]
            assert getattr(paper, field) == v["value"], key


def test_version_3s_pair_is_docs_v3s():
    pair = v3_losses(raw())
    v3 = " ".join((REPO / "docs" / "annex" / "v3.md").read_text().split())
    for arm, name in (("baseline", "baseline"), ("nonlinear", "nonlinear query")):
        value, low, high = pair[arm]
        assert f"| {name} | {value:.3f} ({low:.3f} to {high:.3f}) |" in v3


def bad(tmp_path, old: str, new: str):
    """The data file with `old` replaced, beside the benchmarks it names."""
    path = tmp_path / "docs" / "findings.yaml"
    path.parent.mkdir(exist_ok=True)
    if not (tmp_path / "benchmarks").exists():
        (tmp_path / "benchmarks").symlink_to(REPO / "benchmarks")
    text = DATA.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "value: 2.956,",
            "value: two,",
            r"values\.v1-baseline\.value: 'two' is not of type",
        ),
        (
            "{source: audit,",
            "{source: auditt,",
            r"values\.audit-d2z-59k\.source: no source",
        ),
        (
            "tests: [{ours: v1-nonlinear, reference: audit-d2z-59k}]",
            "tests: [{ours: v1-nonlinear, reference: audit-d2z-60k}]",
            r"claims\[4\]\.tests\[0\]: v1-nonlinear and audit-d2z-60k are not at one step",
        ),
        (
            "runs: [baseline, resgelu-lr3e-3]",
            "runs: [baseline, nope]",
            r"claims\[0\]\.settle\.runs: 'nope' is no experiment of .*experiments\.yaml$",
        ),
        ("runs: [group tuning]", "runs: [group tunin]", r"'tunin' is no group of"),
        (
            "- id: v1-wider-mlp",
            "- id: v1-gain",
            r"claims\[1\]\.id: 'v1-gain' is an earlier",
        ),
        (
            "claims: [v1-gain, v1-wider-mlp,",
            "claims: [v1-gains, v1-wider-mlp,",
            r"downstream\.claims\[0\]: no claim 'v1-gains'",
        ),
        (
            "value: 2.956, step: 59000",
            "value: 2.956, step: " + "9" * 5000,
            r"line \d+: .*5,000 digits",
        ),
        (
            "value: 0.0140, decimals: 4, step: 59000",
            f"value: 0.0140, decimals: 4, step: {10**30}",
            r"values\.v1-gain\.step: 10{30} is past preset paper's last step, 60003",
        ),
        (
            "value: 2.956,",
            "value: .nan,",
            r"values\.v1-baseline\.value: nan is not (a )?finite",
        ),
        (
            "tokens: 20.0e9,",
            "tokens: .inf,",
            r"values\.mars-adamw-20b\.tokens: inf is not (a )?finite",
        ),
        ("{std: 0.0013,", "{std: .nan,", r"noise_floor\.std: nan is not (a )?finite"),
        ("{std: 0.0013,", "{std: 0,", r"noise_floor\.std: 0 is less than or equal to"),
        ("runs: 10,", "runs: '²',", r"noise_floor\.runs: '²' is not of type 'integer'"),
        (
            "power: 0.8,",
            "power: 1,",
            r"noise_floor\.power: 1 is greater than or equal to",
        ),
        (
            "source: modded-nanogpt,",
            "source: nope,",
            r"noise_floor\.source: no source 'nope'",
        ),
        (
            "noise_floor:\n",
            "noise_floor_:\n",
            r"'noise_floor' is a required property|noise_floor_",
        ),
        (
            "schedule: mars-adamw,\n",
            "schedule: mars,\n",
            r"values\.mars-adamw-20b\.schedule: no schedule",
        ),
        (
            "schedule: mars-adamw,\n",
            "\n",
            r"claims\[0\]\.bracket\.between: not readings of one",
        ),
        (
            "warmup_steps: 2000,",
            "warmup_steps: 200000,",
            r"schedules\.mars-adamw: warm-up 200000 of",
        ),
        (
            "{source: mars-config,",
            "{source: marss,",
            r"schedules\.mars-adamw\.source: no source",
        ),
        (
            'tuning: {points: 2, where: "weight decay 0.1 and 0.05 (diverged),'
            ' docs/specification.md §4.3"},\n',
            "",
            r"claims\[0\]\.claimed\[0\]\.reference: values\.v1-baseline states no tuning",
        ),
        (
            "tuning: {points: 2,",
            "tuning: {points: 0,",
            r"values\.v1-baseline\.tuning\.points: 0 is less",
        ),
        (
            "also_in: [paper-v3],",
            "also_in: [paper-v4],",
            r"values\.v3-loss-gain\.also_in\[0\]: no source",
        ),
        (
            "bench: ../benchmarks/results/gpu-nvidia-h200/levers-default.json",
            "bench: ../benchmarks/results/gpu-nvidia-h200/nope.json",
            r"cost\.bench: .*nope\.json: no such file",
        ),
        (
            "bench: ../benchmarks/results/gpu-nvidia-h200/levers-default.json",
            "bench: ../benchmarks/results/gpu-nvidia-h200/levers.json",
            r"cost\.bench: .*levers\.json: not a `repro bench --json` report",
        ),
        (
            "bench: ../benchmarks/results/gpu-nvidia-h200/levers-default.json",
            "bench: ../benchmarks/results",
            r"cost\.bench: .*results: .*",
        ),
    ],
)
def test_bad_data_is_one_line_naming_the_file_and_field(tmp_path, capsys, old, new, message):
    path = bad(tmp_path, old, new)
    assert main(["findings", "--data", str(path), "--out", str(tmp_path / "page.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err, err
    assert re.search(message, err), err
    assert not (tmp_path / "page.md").exists()


def import_log(tmp_path, at_59k: float) -> str:
    """The audit's best small-scale log, as `repro import-audit-logs` imports it."""
    rows = [(s, 3.0, 3.3 - s / 1e5) for s in range(0, 59000, 1000)]
    rows += [(59000, 2.9, at_59k), (60000, 2.88, 2.8948)]
    write_log(tmp_path / "logs" / "gpt3small_d2z_lr4p8e3_60k.csv", rows)
    out = tmp_path / "audit"
    assert main(["import-audit-logs", str(tmp_path / "logs"), "--out", str(out)]) == 0
    return str(out)


def test_the_audits_values_are_checked_against_its_imported_log(tmp_path, capsys):
    audit = import_log(tmp_path, 2.9146)
    page = tmp_path / "findings.md"
    shutil.copy(PAGE, page)
    assert main(["findings", "--data", str(DATA), "--out", str(page), "--audit-runs", audit]) == 0
    out = capsys.readouterr().out
    assert "checked audit-d2z-59k: 2.9146 at step 59000" in out
    assert "checked audit-d2z-60k: 2.8948 at step 60000" in out
    assert page.read_text() == PAGE.read_text()


def test_a_value_the_imported_log_does_not_give_is_refused(tmp_path, capsys):
    audit = import_log(tmp_path, 2.9246)
    args = [
        "findings",
        "--data",
        str(DATA),
        "--out",
        str(tmp_path / "p.md"),
        "--audit-runs",
        audit,
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "values.audit-d2z-59k: 2.9146 at step 59000, but the imported" in err
    assert "says 2.9246" in err


def test_a_bench_file_that_is_a_fifo_is_one_line(tmp_path, capsys):
    fifo = tmp_path / "bench.json"
    os.mkfifo(fifo)
    path = bad(tmp_path, "bench: ../benchmarks/results/gpu-nvidia-h200/levers-default.json",
               f"bench: {fifo}")  # fmt: skip
    assert main(["findings", "--data", str(path), "--out", str(tmp_path / "page.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cost.bench" in err and str(fifo) in err, err
    assert not (tmp_path / "page.md").exists()


def test_the_command_prints_each_claims_verdict(tmp_path, capsys):
    assert main(["findings", "--data", str(DATA), "--out", str(tmp_path / "page.md")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {tmp_path / 'page.md'}"
    claims = raw()["claims"]
    assert [line.split(" (")[0] for line in out[1:]] == [
        f"{v}: {c['id']}" for c, v in zip(claims, verdicts_on_the_page(claims))
    ]


def verdicts_on_the_page(claims: list[dict]) -> list[str]:
    text = PAGE.read_text()
    return [text.split(f"](#{c['id']}) | **")[1].split("**")[0] for c in claims]


def test_check_compares_a_huge_out_in_bounded_memory(tmp_path, capsys):
    huge = tmp_path / "findings.md"
    with open(huge, "wb") as f:  # sparse: a terabyte that takes no disk
        f.truncate(1 << 40)
    assert main(["findings", "--data", str(DATA), "--out", str(huge), "--check"]) == 2
    assert "is not what" in capsys.readouterr().err
    same_size = tmp_path / "edited.md"  # differs only past the first chunk's end
    page = PAGE.read_bytes()
    same_size.write_bytes(page[:-2] + b"x\n")
    assert main(["findings", "--data", str(DATA), "--out", str(same_size), "--check"]) == 2
    assert "is not what" in capsys.readouterr().err
