"""The short training runs of the GPU validation's window (benchmarks/gpu/stages.py): synthetic
token files whose loss can fall, the preset of a 20-step run, and what its metrics.csv says.

Imports no torch: the stage process stays light, its children do the work (of the package, only
the token files' writer, numpy and the standard library).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import yaml

from repro.data.tokens import write_token_files

REPO = Path(__file__).resolve().parents[2]
STEPS = 20  # steps 0..20: evaluations at 0, 10 and 20, checkpoints after 9, 19 and 20
STOP_AFTER = 14  # the stopped leg's last step: it checkpoints there and exits 75
GPT2_VOCAB = 50257
# On a GPU the resumed run's losses agree with the whole run's only to rounding (docs/gpu.md,
# "Exact resume"): the largest relative difference allowed, far above what rounding is expected
# to give over 20 steps, far below what a restore that lost the optimiser's moments gives.
RESUME_TOLERANCE = 2e-3


def write_tokens(directory: Path, tokens: int, seed: int = 0) -> Path:
    """train.bin, val.bin and manifest.json as `repro prepare` lays them out, of tokens drawn
    from a Zipf law: a skewed distribution a model learns within steps (its loss falls, where on
    uniform tokens it cannot fall below log(vocabulary))."""
    rng = np.random.default_rng(seed)
    counts = {"train": tokens, "val": max(tokens // 10, 4096)}
    write_token_files(
        directory,
        {s: ((rng.zipf(1.2, n) - 1) % GPT2_VOCAB).astype(np.uint16) for s, n in counts.items()},
        documents={s: 1 for s in counts},
        source={"kind": "synthetic"},
        tokenizer={"name": "gpt2"},
    )
    return directory


def logits_safe_micro_batch(batch_size: int, block_size: int, vocab_size: int) -> int:
    """The largest micro-batch dividing the batch whose logits stay under 2^31 elements: the
    unchunked loss's edge, past which a kernel indexing in 32 bits would read wrong rows."""
    fits = [n for n in range(1, batch_size + 1) if batch_size % n == 0]
    return max(n for n in fits if n * block_size * vocab_size < 2**31)


def read_preset(name: str) -> dict:
    return yaml.safe_load((REPO / "config" / "presets" / f"{name}.yaml").read_text())


def safe_micro_batch(preset: str) -> int:
    """logits_safe_micro_batch at preset `preset`'s sizes."""
    data = read_preset(preset)
    train, model = data["train"], data["model"]
    return logits_safe_micro_batch(train["batch_size"], model["block_size"], model["vocab_size"])


def window_preset(base: str, directory: Path) -> tuple[Path, int]:
    """A copy of preset `base` for steps 0..STEPS at a micro-batch safe by construction
    (safe_micro_batch), evaluating and checkpointing every 10 steps, a metrics row every step;
    and that micro-batch. A step is 3 micro-batches or so (the least multiple of both
    micro-batches from 3 training ones, at most the preset's batch): the figures are per token
    and the paper's 12 would only make the window's three runs slower."""
    data, mb = read_preset(base), safe_micro_batch(base)
    train = data["train"]
    both = math.lcm(mb, train["eval_micro_batch"])
    train["batch_size"] = min(train["batch_size"], both * math.ceil(3 * mb / both))
    train |= {"max_step": STEPS, "warmup_steps": 5, "decay_steps": STEPS, "eval_interval": 10}
    train |= {"eval_sequences": 2 * train["eval_micro_batch"], "eval_rows": 4}
    runtime = {"train_micro_batch": mb, "checkpoint_interval": 10, "log_interval": 1}
    data["runtime"] = data.get("runtime", {}) | runtime
    data["report"] = {"table_step": STEPS}
    data["description"] = f"{base} for {STEPS + 1} steps: benchmarks/gpu/stages.py's window"
    path = directory / f"{base}-window.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, mb


def read_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


def training_figures(rows: list[dict]) -> dict:
    """What a run's metrics.csv says: the loss falling, the evaluations, the step times (the
    first step's includes compiling the training graph)."""
    times = [float(r["step_time_s"]) for r in rows]
    median = float(np.median(times[1:])) if len(times) > 1 else None
    evaluations = {
        r["step"]: {"train": float(r["eval_train_loss"]), "val": float(r["eval_val_loss"])}
        for r in rows
        if r["eval_val_loss"] != ""
    }
    first, last = float(rows[0]["train_loss"]), float(rows[-1]["train_loss"])
    return {
        "first_loss": first,
        "last_loss": last,
        "loss_fell": last < first,
        "evaluations": evaluations,
        "first_step_time_s": times[0],
        "median_step_time_s": median,
        "compile_time_s": times[0] - median if median is not None else None,
        "tokens_per_s": float(np.median([float(r["tokens_per_s"]) for r in rows[1:]] or [0])),
    }


def resume_verdict(
    resumed: list[dict], whole: list[dict], tolerance: float, after: int = -1
) -> dict:
    """The resumed run's losses against the whole run's (compare_losses) at the steps after
    `after` (the stop: before it both ran the same steps in different processes, and differ only
    by a GPU's run-to-run rounding), status ok where the same steps were logged and the losses
    agree: bit for bit where `tolerance` is 0 (CPU), else to that largest relative difference."""
    later = [[r for r in rows if int(r["step"]) > after] for rows in (resumed, whole)]
    comparison = compare_losses(*later)
    close = comparison["bit_identical"] or (
        tolerance > 0 and comparison["largest_relative_difference"] <= tolerance
    )
    ok = comparison["same_steps"] and close
    return {"status": "ok" if ok else "failed", "tolerance": tolerance} | comparison


def restore_verdict(stopped: dict, resumed: dict, whole: dict) -> dict:
    """What a resume restored against what it must, from the legs' traces (train_leg.py), each
    bit for bit on any device: its first step is the one after the stop; its weights and AdamW
    moments are those the stopped leg saved; and at every step after the stop its learning rate,
    data and random generators' states are the uninterrupted run's."""
    first = stopped.get("stopped_after", -2) + 1
    checks = {"step": resumed.get("first_step") == first}
    for part in ("weights", "moments"):
        checks[part] = resumed.get("restored", {}).get(part) == stopped.get("at_stop", {}).get(part)
    after = {s: v for s, v in resumed.get("steps", {}).items() if int(s) >= first}
    for part, name in (("lr", "schedule"), ("data", "data"), ("rng", "rng")):
        theirs = whole.get("steps", {})
        checks[name] = bool(after) and all(
            s in theirs and v[part] == theirs[s][part] for s, v in after.items()
        )
    wrong = [name for name, ok in checks.items() if not ok]
    return {"restored": checks, "not_restored": wrong}


def sane_loss(loss: float | None, vocab: int = GPT2_VOCAB) -> bool:
    """Whether a training loss on random tokens is one: finite, above zero and at most a nat
    above a uniform guess over the vocabulary (where a wrong reduction or a logits kernel
    indexing past 2^31 lands far off)."""
    return loss is not None and math.isfinite(loss) and 0 < loss <= math.log(vocab) + 1


def compare_losses(resumed: list[dict], whole: list[dict]) -> dict:
    """The resumed run's losses against the whole run's, step by step."""
    columns = ["train_loss", "eval_train_loss", "eval_val_loss"]
    differences, identical = [], True
    for ours, theirs in zip(resumed, whole):
        for column in columns:
            if ours.get(column, "") == theirs.get(column, "") == "":
                continue
            identical &= ours[column] == theirs[column]
            a, b = float(ours[column]), float(theirs[column])
            differences.append(abs(a - b) / max(abs(b), 1e-12))
    return {
        "same_steps": [r["step"] for r in resumed] == [r["step"] for r in whole],
        "bit_identical": identical,
        "largest_relative_difference": max(differences, default=None),
    }
