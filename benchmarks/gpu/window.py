"""The window stage of the GPU validation (docs/gpu.md), for a GPU window of 15 minutes, most
valuable first: the environment and the compile toolchain; `repro train` of residual_gelu at the
paper's shape on synthetic tokens, 21 steps with evaluations and checkpoints (uncompiled from
there on if its graph fails to compile); the baseline and residual_gelu timed at the same
micro-batch, each in a process of its own; a run stopped by SIGTERM and resumed, against the
whole one; last, if the budget allows, the auto micro-batch probe. Run by stages.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from runs import (
    STOP_AFTER,
    read_rows,
    restore_verdict,
    resume_verdict,
    sane_loss,
    window_preset,
    write_tokens,
)
from stages import (
    EXPERIMENTS,
    HERE,
    TRAINED,
    bench,
    environment,
    keep,
    merged,
    open_stage,
    repro,
    timing,
)
from steps import Stage

LEGS = ("stopped", "resumed", "train")  # restore_verdict's order: saved, restored, uninterrupted


def leg(s: Stage, key: str, train: list[str], run_dir: Path, stop: int, limit) -> dict:
    """`repro train` as step `key` into `run_dir` (train_leg.py: stopped after step `stop` when
    it is 0 or more, which must then checkpoint and exit 75, as under a scheduler's requeue)."""
    report = run_dir.with_name(f"{key}.json")
    command = [sys.executable, str(HERE / "train_leg.py"), str(report), str(stop), "--"]
    command += train + ["--out", str(run_dir)]
    outcome = merged(
        s.run(key, command, expect=75 if stop >= 0 else 0, minimum=60, limit=limit), report
    )
    outcome.pop("trace", None)  # read by resume() from the report; the record keeps figures
    if outcome["status"] == "ok" and outcome.get("loss_fell") is False and stop < 0:
        outcome |= {"status": "failed", "reason": "the training loss did not fall"}
    return s.note(key, outcome)


def train_whole(s: Stage, args, train: list[str], run_dir: Path) -> None:
    """Step `train`; where torch.compile fails on the real graph, the rest of the stage runs
    uncompiled, `train` first again (the compile failure kept in the record)."""
    outcome = leg(s, "train", train + args.compile, run_dir, -1, args.limits["train"])
    if "compile_failed" not in outcome:
        return
    args.compile = ["--no-compile"]
    s.record["compile"] = f"off: the training graph failed to compile ({outcome['compile_failed']})"
    s.say("the training graph failed to compile: every later step runs uncompiled (--no-compile)")
    shutil.rmtree(run_dir, ignore_errors=True)
    leg(s, "train", train + args.compile, run_dir, -1, args.limits["train"])


def pair_arms(s: Stage, args, scratch: Path, mb: int) -> None:
    """Steps `pair_<experiment>`, one process each (a crash or time-out of one loses nothing of
    the other), then step `pair`: the ratio of their step times at the same micro-batch."""
    arms = {}
    for experiment in EXPERIMENTS:
        key = f"pair_{experiment}"
        options = ["--experiment", experiment, *timing(args, mb)]
        arms[experiment] = bench(
            s, key, args, scratch, *options, minimum=60, limit=args.limits[key]
        )
    # An arm's row, where it ran and its micro-batch fitted (an out-of-memory row has no time).
    rows = {
        e: (a.get("fastest") or [{}])[0] if a["status"] == "ok" else {} for e, a in arms.items()
    }
    lacking = [e for e, row in rows.items() if "step_s" not in row]
    if lacking:
        s.note("pair", {"status": "skipped", "reason": f"no figures of {', '.join(lacking)}"})
        return
    baseline = rows[EXPERIMENTS[0]]["step_s"]
    ratios = {e: row["step_s"] / baseline for e, row in rows.items() if e != EXPERIMENTS[0]}
    s.note("pair", {"status": "ok", "step_time_ratios": ratios})
    s.say(f"pair: step time over the baseline's: {ratios}")


def resume(s: Stage, scratch: Path, tolerance: float) -> None:
    """Step `resume`: what the resumed leg restored against what the stopped leg saved and the
    whole run took (runs.restore_verdict, bit for bit), then its losses after the stop against
    the whole run's, bit for bit (tolerance 0, CPU) or to `tolerance` (a GPU); skipped where a
    leg it needs did not finish."""
    steps = s.record["steps"]
    unfinished = [k for k in ("train", "stopped", "resumed") if steps[k]["status"] != "ok"]
    if unfinished:
        why = ", ".join(f"{k} {steps[k]['status']}" for k in unfinished)
        s.note("resume", {"status": "skipped", "reason": f"nothing to compare: {why}"})
    else:
        split, whole = scratch / "split", scratch / "whole"
        traces = [json.loads((scratch / f"{k}.json").read_text())["trace"] for k in LEGS]
        restored = restore_verdict(*traces)
        verdict = resume_verdict(read_rows(split), read_rows(whole), tolerance, STOP_AFTER)
        if restored["not_restored"]:
            verdict["status"] = "failed"
        verdict |= restored | {"checkpoint_bytes": (whole / "ckpt.pt").stat().st_size}
        s.note("resume", verdict)
    s.say(f"resume: {steps['resume']}")


def probe(s: Stage, args, scratch: Path) -> None:
    """Step `probe`, only where the budget allows: the auto micro-batch's probe as training runs
    it, and one step at its choice, whose loss must be a sane one (runs.sane_loss)."""
    options = ["--experiment", TRAINED, "--steps", "1", "--warmup", "0"]
    outcome = bench(s, "probe", args, scratch, *options, minimum=args.limits["probe"])
    if outcome["status"] == "ok":
        loss = (outcome.get("fastest") or [{}])[0].get("loss")
        if not sane_loss(loss):
            s.note("probe", outcome | {"status": "failed", "reason": f"loss {loss} is not sane"})


def stage_window(args) -> int:
    s, scratch = open_stage("window", args)
    environment(s, args, scratch)
    preset, mb = window_preset(args.preset, scratch)
    s.record["micro_batch"] = mb
    s.say(f"micro-batch: {mb} (the largest dividing the batch under 2^31 logits)")
    data = write_tokens(scratch / "data", args.tokens)
    indices = scratch / "indices"
    s.run(
        "indices",
        repro("indices", "--preset", str(preset), "--data", str(data), "--out", str(indices)),
    )
    train = ["train", "--preset", str(preset), "--experiment", TRAINED, "--data", str(data)]
    train += ["--indices", str(indices), "--device", args.device]
    train_whole(s, args, train, scratch / "whole")
    keep(s, scratch / "whole" / "metrics.csv", "train-metrics.csv")
    s.record |= {k: s.record["steps"]["train"].get(k) for k in ("attention_kernel", "compile_mode")}
    pair_arms(s, args, scratch, mb)
    leg(s, "stopped", train + args.compile, scratch / "split", STOP_AFTER, args.limits["leg"])
    leg(s, "resumed", train + args.compile, scratch / "split", -1, args.limits["leg"])
    keep(s, scratch / "split" / "metrics.csv", "resumed-metrics.csv")
    resume(s, scratch, args.resume_tolerance)
    probe(s, args, scratch)
    return s.finish()
