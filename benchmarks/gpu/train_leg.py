"""One `repro train` of the window's stage (benchmarks/gpu/stages.py), reporting its figures.

usage: train_leg.py REPORT.json STOP_AFTER -- train ARGS...

The command line's own `repro train` runs here, in this process. With STOP_AFTER >= 0 this process
sends itself SIGTERM as soon as that step has been taken: the run's own stop-signal handling then
checkpoints at the next step boundary and exits 75, as under a scheduler's preemption, but at a
step known in advance (a signal from outside lands at a step that depends on the device's speed).
REPORT.json gets the exit status, the seconds, what the run's metrics.csv says (runs.py's
training_figures: the loss, the evaluations, the compile time, tokens/s), the MFU, and on CUDA the
peak memory allocated and reserved.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
from runs import read_rows, training_figures

import repro.training.loop
from repro.annex.perf.cost import known_peak_flops, model_size
from repro.cli import main
from repro.config import load_run


def stop_after(step: int) -> None:
    take_step = repro.training.loop.train_step

    def train_step(*args, **kwargs):
        loss = take_step(*args, **kwargs)
        if args[3] == step:  # train_step(model, optimizer, batches, step, ...)
            os.kill(os.getpid(), signal.SIGTERM)
        return loss

    repro.training.loop.train_step = train_step


def figures(train_args: list[str]) -> dict:
    """The run's figures from its metrics.csv, with the MFU on a GPU of known peak."""
    option = lambda name: train_args[train_args.index(name) + 1]  # noqa: E731
    out = Path(option("--out"))
    if not (out / "metrics.csv").exists():
        return {}
    result = training_figures(read_rows(out))
    if torch.cuda.is_initialized():
        run = load_run(option("--preset"), option("--experiment"))
        peak = known_peak_flops(torch.cuda.get_device_name())
        per_token = model_size(run.model)["flops_per_token"]
        result["mfu"] = result["tokens_per_s"] * per_token / peak if peak else None
        result["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return result


if __name__ == "__main__":
    report, stop, separator, *train_args = sys.argv[1:]
    assert separator == "--", __doc__
    if int(stop) >= 0:
        stop_after(int(stop))
    began = time.monotonic()
    code = main(train_args)
    result = {"exit": code, "seconds": round(time.monotonic() - began, 1)} | figures(train_args)
    with open(report, "w") as f:
        json.dump(result, f)
    print(f"train leg: {result}", flush=True)
    sys.exit(code)
