"""The numbers the README and docs/ state that the code computes are the code's: run counts and
GPU-hours (as `repro describe` states them), the presets in `gpu_presets`, and the venue of the
citation."""

from __future__ import annotations

import functools

import yaml
from conftest import REPO


def page(name: str) -> str:
    return " ".join((REPO / name).read_text().split())  # a phrase may wrap anywhere


def gpu_hours(preset: str, group: str) -> list[float]:
    from repro.config import load_experiments

    experiments = load_experiments(REPO / "config" / "experiments.yaml")
    return [run_gpu_hours(preset, e.name) for e in experiments.group(group)]


@functools.cache
def run_gpu_hours(preset: str, experiment: str) -> float:
    """As `repro describe --preset PRESET --experiment EXPERIMENT` states it."""
    from repro.annex.perf.cost import describe
    from repro.config import load_run

    return describe(load_run(preset, experiment))["gpu_hours"]


def test_run_counts_and_gpu_hours_the_pages_state_are_the_codes():
    from repro.config import load_experiments

    groups = load_experiments(REPO / "config" / "experiments.yaml")
    table1, figure2 = ({e.name for e in groups.group(g)} for g in ("table1", "figure2"))
    paper_run, table1_hours, figure2_hours = (
        gpu_hours("paper", "table1")[0],  # the baseline
        sum(gpu_hours("paper", "table1")),
        sum(gpu_hours("paper", "figure2")),
    )
    readme, spec, tuning = (
        page("README.md"),
        page("docs/specification.md"),
        page("docs/annex/tuning.md"),
    )
    assert f"| one run (baseline, 0.855 GFLOP/token) | {paper_run:.1f} |" in spec
    assert f"| Table 1 + Figure 1 ({len(table1)} runs) | {table1_hours:.1f} |" in spec
    shared = len(table1 & figure2)
    sweep = f"({len(figure2)} runs, {shared} of them shared with Table 1) | {figure2_hours:.1f} |"
    assert sweep in spec
    assert f"(group `figure2`, {len(figure2)} runs: it trains them)" in readme
    assert f"take {table1_hours:.0f} GPU-hours at 40% MFU" in readme
    assert f"For less than {table1_hours:.0f} GPU-hours" in readme
    assert f"the `figure2` group adds {len(figure2 - table1)} runs beyond Table 1's" in spec
    assert f"less than a paper run's {paper_run:.1f} GPU-hours?" in tuning
    tuning_runs = len(gpu_hours("paper", "tuning"))
    assert f"group `tuning` ({tuning_runs} runs), one seed" in tuning
    assert (
        f"| `paper` | {paper_run:.1f} GPU-hours | {sum(gpu_hours('paper', 'tuning')):.1f}" in tuning
    )
    assert f"| `screen` | {gpu_hours('screen', 'table1')[0]:.1f} GPU-hours" in tuning
    assert f"| {sum(gpu_hours('screen', 'tuning')):.1f} GPU-hours |" in tuning


def test_the_gpu_presets_and_the_venue_the_pages_name_are_the_configurations():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    listed = ", ".join(f"`{p}`" for p in config["gpu_presets"])
    assert f"for the presets in `gpu_presets` ({listed})" in page("docs/distributed.md")
    assert f"| `gpu_presets` | `[{', '.join(config['gpu_presets'])}]` |" in page("config/README.md")
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    venue = " ".join(cff["references"][0]["conference"]["name"].split())
    bibtex = page("README.md").split("```bibtex", 1)[1].split("```", 1)[0]
    assert f"booktitle = {{{venue}}}" in " ".join(bibtex.split())


def test_each_groups_cpu_time_at_tiny_names_the_groups_run_count():
    """A figure timed on a group that has since grown no longer applies: its record must say how
    many runs it timed (benchmarks/results/dag-tiny.md, where the measured times live)."""
    from repro.config import load_experiments

    groups = load_experiments(REPO / "config" / "experiments.yaml")
    record = "benchmarks/results/dag-tiny.md"
    stated = [  # the group, how the record counts the runs it timed
        ("figure2", "(`results/figures/figure2.png`, its {} runs) 322 s of CPU"),
        ("decay_to_zero", "its {} runs and the notebook took 129 s of CPU"),
        ("query_ablation", "the group's {} runs and the notebook took 404 s"),
        ("tuning", "the group's {} runs and the notebook took 181 s of CPU"),
        ("v3", "the group's {} runs and the notebook took 200 s of CPU"),
    ]
    for group, phrase in stated:
        assert phrase.format(len(groups.group(group))) in page(record), group
