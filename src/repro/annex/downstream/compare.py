"""The Table 1 configurations on downstream tasks, item by item (docs/annex/downstream.md)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pandas as pd

from repro.analysis.seeds import summarise
from repro.annex.downstream.scores import RESULTS_JSON, read_items, read_results, task_metrics
from repro.annex.downstream.tasks import ANCHORS
from repro.errors import ReproError
from repro.files import write_csv

COLUMNS = [
    "experiment",
    "task",
    "metric",
    "value",
    "stderr",
    "n_items",
    "diff_vs_baseline",
    "diff_ci_low",
    "diff_ci_high",
    "anchor",
]
# Over seeds (seed k's folder under seed<k>/, as its runs are): NaN where one seed was scored.
SEED_COLUMNS = [
    "n_seeds",
    "value_mean",
    "value_sd",
    "n_pairs",
    "diff_seeds_mean",
    "diff_seeds_sd",
    "diff_seeds_ci_low",
    "diff_seeds_ci_high",
]
SEED_FOLDER = re.compile(r"seed(0|[1-9][0-9]*)")
BOOTSTRAP_SAMPLES = 10_000


def paired_bootstrap(ours, base, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0):
    """(mean of ours - base, its 2.5th and 97.5th percentiles over item resamples)."""
    diff = np.asarray(ours, dtype=float) - np.asarray(base, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.concatenate(  # 500 resamples at a time: HellaSwag's 10k items fit in memory
        [
            diff[rng.integers(0, len(diff), (min(500, samples - done), len(diff)))].mean(axis=1)
            for done in range(0, samples, 500)
        ]
    )
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def read_scores(result_dir: str | Path) -> tuple[dict, dict]:
    return read_results(result_dir), read_items(result_dir)


def compare(result_dirs: dict[str, str | Path], baseline: str) -> pd.DataFrame:
    read = {name: read_scores(path) for name, path in result_dirs.items()}
    base_items = read[baseline][1] if baseline in read else {}
    rows = []
    for name, (results, items) in read.items():
        for task, metrics in results["results"].items():
            for metric, value, stderr in task_metrics(metrics):
                row = {
                    "experiment": name,
                    "task": task,
                    "metric": metric,
                    "value": value,
                    "stderr": stderr,
                    "n_items": results.get("n-samples", {}).get(task, {}).get("effective"),
                    "anchor": ANCHORS.get(task, ""),
                }
                ours, base = items.get(task, {}).get(metric), base_items.get(task, {}).get(metric)
                if ours is not None and base is not None and len(ours) == len(base):
                    low_high = paired_bootstrap(ours, base)
                    row.update(zip(("diff_vs_baseline", "diff_ci_low", "diff_ci_high"), low_high))
                rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def experiment_seed(folder: str | Path) -> tuple[str, int]:
    """(experiment, seed) of a result folder: seed k's is seed<k>/<experiment>, as its run's is
    (docs/seeds.md); any other folder is seed 0's."""
    folder = Path(folder)
    seed = SEED_FOLDER.fullmatch(folder.parent.name)
    return folder.name, int(seed.group(1)) if seed else 0


def by_seed(folders: list[str | Path], baseline: str) -> dict[int, dict[str, str | Path]]:
    """The folders by seed and experiment; each seed scored must have the baseline's too, for
    the pairs are seed k against the baseline's seed k."""
    found: dict[int, dict[str, str | Path]] = {}
    for folder in folders:
        name, seed = experiment_seed(folder)
        if name in found.setdefault(seed, {}):
            raise ReproError(f"{folder}: seed {seed} of {name} is also {found[seed][name]}")
        found[seed][name] = folder
    distinct_scorings(folders)
    if not any(baseline in named for named in found.values()):
        raise ReproError(f"--baseline {baseline}: no result folder of that name")
    for seed, named in found.items():
        if baseline not in named:
            folder = next(iter(named.values()))
            raise ReproError(f"{folder}: no folder of the baseline {baseline} at seed {seed}")
    return dict(sorted(found.items()))


def distinct_scorings(folders: list[str | Path]) -> None:
    """Each folder a scoring of its own: lm-eval's results.json records when it ran, so a folder
    whose results.json is another's byte for byte is a copy of it or a link to it, and would
    count one run twice (as another seed, or as another experiment)."""
    seen: dict[str, str | Path] = {}
    for folder in folders:
        try:
            digest = hashlib.sha256((Path(folder) / RESULTS_JSON).read_bytes()).hexdigest()
        except OSError:
            continue  # read_scores names what is wrong with it
        if digest in seen:
            raise ReproError(
                f"{folder}: the same {RESULTS_JSON} as {seen[digest]} (a copy of it or a link to "
                f"it): one scoring counted twice"
            )
        seen[digest] = folder


def seed_scores(folders: dict[int, dict[str, str | Path]]) -> pd.DataFrame:
    """experiment, seed, task, metric, value: every score of every folder."""
    rows = [
        (name, seed, task, metric, value)
        for seed, named in folders.items()
        for name, folder in named.items()
        for task, metrics in read_scores(folder)[0]["results"].items()
        for metric, value, _ in task_metrics(metrics)
    ]
    return pd.DataFrame(rows, columns=["experiment", "seed", "task", "metric", "value"])


def over_seeds(scores: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per experiment, task and metric: the score's mean and spread over seeds, and its paired
    difference from the baseline (seed k against seed k) with its 95% t-interval."""
    keys = ["experiment", "task", "metric"]
    spread = summarise(scores.groupby(keys, sort=False), "value")
    base = scores[scores["experiment"] == baseline].drop(columns="experiment")
    pairs = scores.merge(base, on=["seed", "task", "metric"], suffixes=("", "_base"))
    pairs["diff_seeds"] = pairs["value"] - pairs["value_base"]
    diff = summarise(pairs.groupby(keys, sort=False), "diff_seeds")
    diff = diff.rename(columns={"n_seeds": "n_pairs"})
    return spread.join(diff).reset_index()[[*keys, *SEED_COLUMNS]]


def compare_seeds(folders: list[str | Path], baseline: str) -> pd.DataFrame:
    """Seed 0's table (or the first seed scored) with the columns over seeds beside it."""
    found = by_seed(folders, baseline)
    first = compare(next(iter(found.values())), baseline)
    spread = over_seeds(seed_scores(found), baseline)
    # a left merge keeps the folders' order (an outer one sorts); every score is in `spread`
    table = spread.merge(first, on=["experiment", "task", "metric"], how="left")
    return table[[*COLUMNS, *SEED_COLUMNS]]


def write_comparison(folders: list[str | Path], baseline: str, out: str | Path) -> pd.DataFrame:
    table = compare_seeds(folders, baseline)
    write_csv(table, out)
    return table
