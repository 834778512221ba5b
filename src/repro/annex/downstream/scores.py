"""lm-eval's scores as `repro downstream` writes them (results.json, items.json), read back and
checked once for every reader (the downstream table, the export's model card): each field those
readers use of its type, each task's name a name; else one line naming the file and the field.
No lm-eval here: reading scores needs none."""

from __future__ import annotations

import math
import re
from pathlib import Path

from repro.errors import ReproError
from repro.files import read_json

RESULTS_JSON = "results.json"  # lm-eval's result dictionary, as its own CLI writes it
ITEMS_JSON = "items.json"  # task -> metric -> one score per item, in document order
# A task's name as lm-eval names its tasks: it becomes a file's name in an export's
# .eval_results/, so no separator, no NUL and no leading dot (no `..`).
TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


class ScoresError(ReproError):
    """A results.json or items.json that is not what `repro downstream` writes."""


def is_number(value) -> bool:
    return isinstance(value, (int, float))  # bools too: an item's acc is True or False


def task_metrics(metrics: dict) -> list[tuple[str, float, float | None]]:
    """(metric, value, stderr or None) of each number lm-eval reports for a task."""
    scored = []
    for key, value in metrics.items():
        metric, _, filter_name = key.partition(",")
        if metric == "sample_len" or metric.endswith("_stderr") or not is_number(value):
            continue
        stderr = metrics.get(f"{metric}_stderr,{filter_name}")
        ok = is_number(stderr) and math.isfinite(stderr)
        scored.append((metric, float(value), float(stderr) if ok else None))
    return scored


def read_results(folder: str | Path) -> dict:
    """A scoring folder's results.json, checked."""
    path = Path(folder) / RESULTS_JSON
    return checked_results(path, read_json(path))


def read_items(folder: str | Path) -> dict:
    """A scoring folder's items.json, checked."""
    path = Path(folder) / ITEMS_JSON
    return checked_items(path, read_json(path))


def wrong(path: Path, field: str, what: str):
    raise ScoresError(f"{path}: {field}: {what}")


def checked_results(path: Path, results) -> dict:
    """results.json's fields the readers use, each of its type, each task's name a name."""
    if not isinstance(results, dict):
        wrong(path, "(top level)", "not a mapping")
    if "results" not in results:
        wrong(path, "results", "missing")
    if not isinstance(results["results"], dict):
        wrong(path, "results", "not a mapping of task to metrics")
    for task, metrics in results["results"].items():
        if not TASK_NAME.fullmatch(task):
            wrong(path, f"results.{ascii(task)}", "not a task's name (letters, digits, _ . -)")
        if not isinstance(metrics, dict):
            wrong(path, f"results.{task}", "not a mapping of metric to value")
    for key in ("configs", "n-shot", "n-samples"):
        if not isinstance(results.get(key, {}), dict):
            wrong(path, key, "not a mapping of task to its value")
    for key in ("configs", "n-samples"):
        for task, value in results.get(key, {}).items():
            if not isinstance(value, dict):
                wrong(path, f"{key}.{ascii(task)}", "not a mapping")
    for task, shots in results.get("n-shot", {}).items():
        if type(shots) is not int or shots < 0:
            wrong(path, f"n-shot.{ascii(task)}", f"{shots!r}, not a count of examples")
    return results


def checked_items(path: Path, items) -> dict:
    """items.json: task -> metric -> one number per item."""
    if not isinstance(items, dict):
        wrong(path, "(top level)", "not a mapping of task to its metrics")
    for task, metrics in items.items():
        if not isinstance(metrics, dict):
            wrong(path, ascii(task), "not a mapping of metric to item scores")
        for metric, scores in metrics.items():
            if not isinstance(scores, list) or not all(map(is_number, scores)):
                wrong(path, f"{ascii(task)}.{ascii(metric)}", "not a list of numbers")
    return items
