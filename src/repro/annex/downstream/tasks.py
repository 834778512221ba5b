"""Running lm-eval tasks on a ReproLM: its result JSON, per-item scores, one line per task."""

from __future__ import annotations

from pathlib import Path

from lm_eval import simple_evaluate
from lm_eval.tasks import TaskManager
from lm_eval.utils import handle_non_serializable

from repro.annex.downstream.model import DownstreamError, ReproLM
from repro.annex.downstream.scores import ITEMS_JSON, RESULTS_JSON, is_number, task_metrics
from repro.files import make_dir, write_json

# GPT-2 124M's scores, for scale (ours are far smaller and shorter-trained).
ANCHORS = {
    "hellaswag": "GPT-2 124M: about 29.6% (completion-style) / 31.1% (harness acc_norm)",
}
SCORED_OUTPUT_TYPES = ("multiple_choice", "loglikelihood", "loglikelihood_rolling")


def load_tasks(names: list[str], include_path: str | Path | None = None) -> TaskManager:
    """lm-eval's and include_path's tasks, each checked: it exists, is log-likelihood, loads."""
    manager = TaskManager(include_path=str(include_path) if include_path else None)
    unknown = [name for name in names if name not in manager.all_tasks]
    if unknown:
        raise DownstreamError(
            f"unknown lm-eval task(s): {', '.join(unknown)} (`lm_eval ls tasks` lists them; a "
            "task of your own: its YAML in an --include-path folder)"
        )
    for name in names:
        for task_name, task in _load(manager, name).items():
            if task.OUTPUT_TYPE not in SCORED_OUTPUT_TYPES:
                raise DownstreamError(
                    f"task {task_name}: output type {task.OUTPUT_TYPE} (generation) is not "
                    f"supported; repro downstream scores {', '.join(SCORED_OUTPUT_TYPES)} tasks"
                )
    return manager


def _load(manager: TaskManager, name: str) -> dict:
    """The task `name` (a group's subtasks) with its data, or one line saying why not."""
    try:
        return manager.load([name])["tasks"]
    except ConnectionError as e:  # offline (HF_HUB_OFFLINE, no network) and not in the cache
        raise DownstreamError(
            f"task {name}: its data are neither in the datasets cache nor reachable on the "
            f"Hugging Face hub ({e}); run it once with a network (the data stay in the cache, "
            f"~/.cache/huggingface or $HF_DATASETS_CACHE, and HF_DATASETS_OFFLINE=1 then "
            f"works), or define the task over local files in an --include-path folder"
        ) from None
    except Exception as e:  # a task of one's own whose YAML or data files lm-eval cannot read
        reason = (str(e) or type(e).__name__).splitlines()[0]
        raise DownstreamError(f"task {name}: lm-eval cannot load it ({reason})") from None


def run_tasks(
    lm: ReproLM,
    names: list[str],
    manager: TaskManager,
    out_dir: str | Path,
    limit: int | None = None,
    num_fewshot: int | None = None,
) -> dict:
    """Evaluate `lm` on the tasks into out_dir/results.json and items.json."""
    out_dir = make_dir(out_dir)  # before the evaluation, which a folder that cannot be made loses
    results = simple_evaluate(
        model=lm,
        tasks=names,
        task_manager=manager,
        limit=limit,
        num_fewshot=num_fewshot,
        log_samples=True,
        bootstrap_iters=1000,
    )
    samples = results.pop("samples")
    write_json(out_dir / RESULTS_JSON, results, default=handle_non_serializable)
    write_json(out_dir / ITEMS_JSON, item_scores(samples))
    return results


def item_scores(samples: dict) -> dict:
    """task -> metric -> each item's score, for per-item metrics (acc, acc_norm)."""
    scores = {}
    for task, logged in samples.items():
        logged = sorted(logged, key=lambda s: s["doc_id"])
        metrics = [m for m in logged[0]["metrics"] if is_number(logged[0].get(m))] if logged else []
        scores[task] = {m: [float(s[m]) for s in logged] for m in metrics}
    return scores


def summary_lines(results: dict) -> list[str]:
    lines = []
    for task, metrics in results["results"].items():
        shown = [
            f"{metric} {value:.4f}" + (f" ± {stderr:.4f}" if stderr is not None else "")
            for metric, value, stderr in task_metrics(metrics)
        ]
        n = results.get("n-samples", {}).get(task, {}).get("effective")
        line = f"{task}: {', '.join(shown)}" + (f" ({n} items)" if n else "")
        lines.append(line + (f"  [{ANCHORS[task]}]" if task in ANCHORS else ""))
    return lines
