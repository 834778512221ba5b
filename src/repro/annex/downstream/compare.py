"""The Table 1 configurations on downstream tasks, item by item (docs/annex/downstream.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from repro.annex.downstream.tasks import ANCHORS, ITEMS_JSON, RESULTS_JSON, task_metrics
from repro.files import read_json, write_csv

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
    result_dir = Path(result_dir)
    return read_json(result_dir / RESULTS_JSON), read_json(result_dir / ITEMS_JSON)


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


def write_comparison(result_dirs: dict[str, str | Path], baseline: str, out: str | Path):
    table = compare(result_dirs, baseline)
    write_csv(table, out)
    return table
