"""A trained run as a model others can load (docs/models.md, "Export and loading")."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import yaml

from repro.analysis.runs import Run, read_run
from repro.annex.authors.checkpoint import load_any_checkpoint
from repro.annex.downstream.scores import RESULTS_JSON, checked_results, task_metrics
from repro.annex.models.hub import CONFIG_JSON, MARKER, WEIGHTS, is_gpt2, write_model
from repro.config import load_preset
from repro.files import atomic_folder, atomic_write, make_dir, read_json, write_json
from repro.model import count_parameters
from repro.rundir import CHECKPOINT, LIVE, RUN_JSON, RunError
from repro.runtime.signals import sigterm_interrupts

CARD = "README.md"
EVAL_RESULTS = ".eval_results"  # the Hub's evaluation results, one YAML file per benchmark
PAPER = (
    'Marko Karbevski, "Beyond Linearity in Attention Projections: The Case for Nonlinear '
    'Queries", ICLR 2026 Workshop GRaM, [arXiv:2603.13381](https://arxiv.org/abs/2603.13381)'
)
QUERIES = {  # docs/specification.md §1.2
    "linear": "q = x W_Q, GPT-2's linear query (the baseline)",
    "identity": "q = x (W_Q = I)",
    "residual_gelu": "q = (x + f(x)) / 2, f(x) = LN(GELU(RMSNorm(x) W1) W2) (the paper's)",
    "residual_linear": "q = (x + x W_Q) / 2 (an ablation)",
    "residual_bottleneck_linear": "q = (x + LN(RMSNorm(x) W1 W2)) / 2 (an ablation: no GELU)",
}
QK_NORM = "; queries and keys RMS-normalised per head (qk_norm)"
GATES = {  # attention_gate: each head's output times sigmoid(x W_g) (docs/annex/ablation.md)
    None: "",
    "headwise": "; each head's attention output gated, one sigmoid gate per head",
    "elementwise": "; each head's attention output gated, one sigmoid gate per channel",
}
LICENSE = "mit"  # the package's (pyproject.toml, LICENSE); the weights are trained here


def checkpoint_of(run_dir: Path) -> Path:
    """A run's ckpt.pt: in the run directory, or in live/ once its metrics were published."""
    for path in (run_dir / CHECKPOINT, run_dir / LIVE / CHECKPOINT):
        if path.exists():
            return path
    raise RunError(
        f"{run_dir}: no {CHECKPOINT} here or in {LIVE}/ (an imported authors' run has none: "
        f"its checkpoint stays in their folder)"
    )


def export(run_dir: str | Path, out: str | Path, downstream=()) -> Path:
    """Export the run's latest checkpoint into `out`, whole or not at all; an earlier export
    there is replaced, none of its files kept. `downstream`: `repro downstream --out` folders of
    this model, whose scores the card states and .eval_results/ holds in the Hub's format."""
    run_dir, out = Path(run_dir), Path(out)
    run = read_run(run_dir)
    check_card_fields(run)
    scores = [read_scores(Path(folder)) for folder in downstream]
    checkpoint = checkpoint_of(run_dir)
    if out.exists() and not out.is_dir():
        raise RunError(f"{out}: a file, not a folder; use another --out")
    if out.is_dir() and any(out.iterdir()) and not is_export(out):
        raise RunError(
            f"{out}: not empty and not a folder repro export wrote (its {CONFIG_JSON} has no "
            f"{MARKER!r}); use another --out"
        )
    model, steps, _ = load_any_checkpoint(checkpoint)
    make_dir(out.parent)
    # whole: none of an earlier export's files stays (its model code among them)
    with sigterm_interrupts(), atomic_folder(out, whole=True) as folder:
        write_model(model, folder)
        write_json(folder / RUN_JSON, shareable(read_json(run.path / RUN_JSON)))
        with atomic_write(folder / CARD) as f:
            f.write(model_card(run, model, steps, out.name, scores))
        write_eval_results(folder / EVAL_RESULTS, scores)
    return out


def read_scores(folder: Path) -> dict:
    """lm-eval's results.json that `repro downstream --out folder` wrote, checked; one line where
    there is none."""
    path = folder / RESULTS_JSON
    results = read_json(path) if path.is_file() else None
    if not isinstance(results, dict) or "results" not in results:
        raise RunError(f"--downstream {folder}: no {RESULTS_JSON} of `repro downstream --out` here")
    return checked_results(path, results)


def scored_tasks(scores: list[dict]):
    """(task, metric, value, stderr, its Hub dataset or None, shots) of each task scored: the
    task's first metric lm-eval reports (acc_norm before acc, where both are)."""
    for results in scores:
        for task, metrics in results["results"].items():
            ranked = sorted(task_metrics(metrics), key=lambda m: m[0] != "acc_norm")
            if not ranked:
                continue
            metric, value, stderr = ranked[0]
            config = results.get("configs", {}).get(task, {})
            dataset = config.get("dataset_path")
            hub = dataset if isinstance(dataset, str) and "/" in dataset else None  # not "json"
            yield task, metric, value, stderr, hub, results.get("n-shot", {}).get(task, 0)


def write_eval_results(folder: Path, scores: list[dict]) -> None:
    """.eval_results/<task>.yaml, the Hub's evaluation results format, for each task scored on a
    dataset of the Hub (a task over a local file has no Hub dataset to name)."""
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    for task, metric, value, _, hub, shots in scored_tasks(scores):
        if hub is None:
            continue
        notes = f"lm-evaluation-harness, {metric}, {shots}-shot"
        entry = EvalResultEntry(dataset_id=hub, task_id=task, value=value, notes=notes)
        make_dir(folder)
        with atomic_write(folder / f"{task}.yaml") as f:
            yaml.safe_dump(eval_result_entries_to_yaml([entry]), f, sort_keys=False)


# What the model card states of run.json (read_record has typed each where present).
CARD_FIELDS = (
    *(f"identity.model.{k}" for k in ("n_layer", "n_head", "d_model", "block_size", "vocab_size")),
    "identity.train.batch_size",
    "identity.train.max_step",
    "config.experiment",
)


def check_card_fields(run: Run) -> None:
    """Refuse, before any checkpoint is read, a run.json without what the card states."""
    record = {"identity": run.record.identity, "config": run.record.config}
    for dotted in CARD_FIELDS:
        value = record
        for key in dotted.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            raise RunError(f"{run.path / RUN_JSON}: {dotted}: missing (the model card states it)")
    if not card_corpus(run.record.config):
        raise RunError(f"{run.path / RUN_JSON}: config.corpus: missing (the model card states it)")


def card_corpus(config: dict) -> str | None:
    """run.json's corpus: the resolved run's, or (older records) its preset's as loaded."""
    return config.get("corpus") or config.get("preset", {}).get("corpus")


def is_export(folder: Path) -> bool:
    """Whether repro export wrote `folder`, so that an export may replace it."""
    try:
        config = json.loads((folder / CONFIG_JSON).read_text())
    except (OSError, ValueError):  # none, a folder of that name, not JSON
        return False
    return isinstance(config, dict) and MARKER in config


def shareable(value):
    """`value` with repository-relative paths: an export names no folder of its machine."""
    if isinstance(value, dict):
        return {k: shareable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shareable(v) for v in value]
    if isinstance(value, str) and os.path.isabs(value):
        return repository_relative(Path(value))
    return value


def repository_relative(path: Path) -> str:
    """`path` relative to the nearest pyproject.toml or .git above it, else its name."""
    for root in path.parents:
        if (root / "pyproject.toml").exists() or (root / ".git").exists():
            return str(path.relative_to(root))
    return path.name


def last_evaluation(run: Run, steps: int) -> str:
    """The run's last evaluation no later than the exported weights, and how it relates to them."""
    evals = run.evals()
    evals = evals[evals.index <= steps]
    if not len(evals):
        return "none logged"
    step, e = int(evals.index[-1]), evals.iloc[-1]
    text = (
        f"validation {e['eval_val_loss']:.4f} ± {e['eval_val_std']:.4f}, train "
        f"{e['eval_train_loss']:.4f} ± {e['eval_train_std']:.4f} at step {step:,}"
    )
    if step == steps:
        return text + " (these weights)"
    return text + f" (the model {steps - step:,} optimiser step(s) before these weights)"


def final_train_loss(trained) -> str:
    if not len(trained):
        return "none logged"
    last = trained.iloc[-1]
    return f"{last['train_loss']:.4f} at step {int(last['step']):,} (the mean of its micro-batches)"


def scale_warning(identity: dict, corpus: str) -> str:
    """Below the paper's scale, the card's warning (it is read without the report's caveats)."""
    paper = load_preset("paper")
    model, train = identity["model"], identity["train"]
    shape = ("n_layer", "n_head", "d_model", "block_size", "vocab_size")  # what a preset sets
    if (
        all(model[k] == getattr(paper.model, k) for k in shape)
        and (train["batch_size"], corpus) == (paper.train.batch_size, paper.corpus)
        and train["max_step"] >= paper.train.max_step
    ):
        return ""
    p = paper.model
    return (
        f"> **Not the paper's scale.** This model has {model['n_layer']} layers of width "
        f"{model['d_model']}, trained {train['max_step'] + 1:,} steps on {corpus}; the paper's "
        f"has {p.n_layer} of width {p.d_model}, trained {paper.train.max_step + 1:,} steps on "
        f"{paper.corpus}. It shows that the pipeline runs: its losses and its gain over a "
        f"baseline are not evidence for or against the paper's claim.\n\n"
    )


def model_card(run: Run, model, steps: int, name: str, scores: list[dict] = ()) -> str:
    """README.md: what the model is, how it was trained, how it scores, how to load and cite it."""
    r, m = run.record, model.config
    params = count_parameters(model)
    token_files = r.data.get("token_files", {})
    preset = r.config.get("preset", {})
    corpus = card_corpus(r.config)
    described = preset.get("description") or shareable(r.config.get("preset_file", ""))
    data = corpus + "".join(
        f", {token_files[s]['tokens']:,} {s} tokens" for s in ("train", "val") if s in token_files
    )
    source = r.data.get("source") or {}
    if source:
        data += " (" + ", ".join(f"{k} {v}" for k, v in source.items()) + ")"
    trained = run.metrics[run.metrics["step"] < steps].dropna(subset=["train_loss"])
    code = f"repro {r.package_version}"
    if r.git_commit:
        code += f", git commit {r.git_commit}" + (
            " with uncommitted changes" if r.git_dirty else ""
        )
    rows = [
        ("paper", PAPER),
        (
            "query",
            f"`{m.query_mode}`: {QUERIES[m.query_mode]}"
            + QK_NORM * m.qk_norm
            + GATES[m.attention_gate],
        ),
        ("experiment", f"`{r.experiment}`: {r.config['experiment'].get('description', '')}"),
        (
            "model",
            f"{m.n_layer} layers, {m.n_head} heads, d_model {m.d_model}, MLP {m.mlp_hidden}, "
            f"context {m.block_size}, vocabulary {m.vocab_size}, "
            f"{'tied' if m.tie_embeddings else 'untied'} embeddings; "
            f"{params['total_params']:,} parameters ({params['non_embedding_params']:,} "
            f"non-embedding)",
        ),
        ("preset", f"`{r.preset}`: {described}"),
        ("data", data + "; GPT-2 tokenizer (tiktoken `gpt2`)"),
        ("steps", f"{steps:,} optimiser steps (run status: {r.status})"),
        ("tokens", f"{steps * r.tokens_per_step:,} ({r.tokens_per_step:,} per step)"),
        ("final train loss", final_train_loss(trained)),
        ("last evaluation", last_evaluation(run, steps)),
        ("code", code),
        ("license", "MIT"),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    warning = scale_warning(r.identity, corpus)
    return f"""---
{yaml.safe_dump(hub_metadata(m, source), sort_keys=False)}---

# {name}

{warning}A GPT-2-style language model trained with the `repro` package, which reproduces the
paper below.

| | |
|---|---|
{table}

{evaluation(run, steps, scores)}
{loading(m, name)}
{CITATION}
The folder holds `{CONFIG_JSON}` (the model configuration), `{WEIGHTS}` (the weights), the GPT-2
tokenizer's files, `generation_config.json` and `{RUN_JSON}` (the run's record: configuration,
data and index hashes, code version, device). The model takes GPT-2 token ids and returns
next-token logits; ids from 50,257 up pad the embedding and are never generated.
"""


CITATION = """## Citation

The method (cite this, and the `repro` package as its CITATION.cff says):

```bibtex
@inproceedings{karbevski2026nonlinear,
  title     = {Beyond Linearity in Attention Projections: The Case for Nonlinear Queries},
  author    = {Karbevski, Marko},
  booktitle = {ICLR 2026 Workshop on Geometry-grounded Representation Learning and Generative
               Modeling (GRaM)},
  year      = {2026},
  eprint    = {2603.13381},
  archivePrefix = {arXiv}
}
```
"""


def evaluation(run: Run, steps: int, scores: list[dict]) -> str:
    """The card's evaluation: the run's own validation loss, the paper's Table 1 row of its
    experiment, and the downstream scores given (their Hub format in .eval_results/)."""
    lines = [f"- Validation loss: {last_evaluation(run, steps)}."]
    paper = run.record.config["experiment"].get("paper")
    if paper:
        lines.append(
            f"- The paper's Table 1 for `{run.record.experiment}`: validation loss "
            f"{paper['val_loss']:.3f} at step 59,000, {paper['rel_improvement']:.2%} below the "
            f"baseline's (at the paper's scale)."
        )
    for task, metric, value, stderr, hub, shots in scored_tasks(scores):
        spread = f" ± {stderr:.4f}" if stderr is not None else ""
        where = f" (Hub dataset `{hub}`)" if hub else " (a local task)"
        lines.append(f"- {task}: {metric} {value:.4f}{spread}, {shots}-shot{where}.")
    return "## Evaluation\n\n" + "\n".join(lines) + "\n"


def load_call(name: str, custom_code: bool) -> str:
    """The one line that loads the folder with transformers: trust_remote_code=True where its
    query needs the folder's code (a folder whose config.json names it in `auto_map`)."""
    trust = ", trust_remote_code=True" if custom_code else ""
    return f"AutoModelForCausalLM.from_pretrained({json.dumps(name)}{trust})"


def export_load_call(out: Path) -> str:
    return load_call(str(out), "auto_map" in read_json(out / CONFIG_JSON))


def hub_metadata(config, source: dict) -> dict:
    metadata = {
        "library_name": "transformers",
        "license": LICENSE,
        "pipeline_tag": "text-generation",
    }
    if source.get("hub_id"):
        metadata["datasets"] = [source["hub_id"]]
    metadata["tags"] = ["gpt2", "causal-lm", "nonlinear-queries", "repro"]
    if not is_gpt2(config):
        metadata["tags"].append("custom_code")
    return metadata


def loading(config, name: str) -> str:
    """The card's section on loading the folder with transformers, lm-eval and repro. The folder's
    name is quoted as a Python string and a shell word: a snippet copied runs nothing else."""
    trust = "" if is_gpt2(config) else ", trust_remote_code=True"
    model_args = f"pretrained={name}" + ("" if is_gpt2(config) else ",trust_remote_code=True")
    code = (
        "It is a plain GPT-2 (`GPT2LMHeadModel`): transformers' own code runs it."
        if is_gpt2(config)
        else "Its query is not GPT-2's, so the folder carries the model's code "
        "(`modeling_repro.py` and the `repro` package's model modules it imports), which "
        "`trust_remote_code=True` runs: read it first."
    )
    python = json.dumps(name)  # a JSON string is a Python string literal of the same text
    return f"""## Loading

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

model = {load_call(name, not is_gpt2(config))}
tokenizer = AutoTokenizer.from_pretrained({python}{trust})
ids = tokenizer("The query", return_tensors="pt").input_ids
print(tokenizer.decode(model.generate(ids, max_new_tokens=20, do_sample=False)[0]))
```

{code} From the Hugging Face Hub: `USER/{name}` in place of the folder. With
lm-evaluation-harness:

```sh
lm_eval --model hf --model_args {shlex.quote(model_args)} --tasks hellaswag
```

With the `repro` package: `repro.annex.models.hub.load_model({python})`.
"""
