"""One `repro train` of stage C (benchmarks/gpu/stages.py), reporting its peak device memory.

usage: train_leg.py REPORT.json STOP_AFTER -- train ARGS...

The command line's own `repro train` runs here, in this process. With STOP_AFTER >= 0 this process
sends itself SIGTERM as soon as that step has been taken: the run's own stop-signal handling then
checkpoints at the next step boundary and exits 75, as under a scheduler's preemption, but at a
step known in advance (a signal from outside lands at a step that depends on the device's speed).
REPORT.json gets the exit status, the seconds, and on CUDA the peak memory allocated and reserved
(the auto micro-batch's probe resets the statistics: the peak is training's).
"""

import json
import os
import signal
import sys
import time

import torch

import repro.train
from repro.cli import main


def stop_after(step: int) -> None:
    take_step = repro.train.train_step

    def train_step(*args, **kwargs):
        loss = take_step(*args, **kwargs)
        if args[3] == step:  # train_step(model, optimizer, batches, step, ...)
            os.kill(os.getpid(), signal.SIGTERM)
        return loss

    repro.train.train_step = train_step


if __name__ == "__main__":
    report, stop, separator, *train_args = sys.argv[1:]
    assert separator == "--", __doc__
    if int(stop) >= 0:
        stop_after(int(stop))
    began = time.monotonic()
    code = main(train_args)
    result = {"exit": code, "seconds": round(time.monotonic() - began, 1)}
    if torch.cuda.is_initialized():
        result["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    with open(report, "w") as f:
        json.dump(result, f)
    print(f"train leg: {result}", flush=True)
    sys.exit(code)
