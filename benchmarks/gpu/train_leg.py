"""One `repro train` of the window's stage (benchmarks/gpu/stages.py), reporting its figures.

usage: train_leg.py REPORT.json STOP_AFTER -- train ARGS...

The command line's own `repro train` runs here, in this process. With STOP_AFTER >= 0 this process
sends itself SIGTERM as soon as that step has been taken: the run's own stop-signal handling then
checkpoints at the next step boundary and exits 75, as under a scheduler's preemption, but at a
step known in advance (a signal from outside lands at a step that depends on the device's speed).
Every leg records what each step took (trace(): its learning rate, data and the random generators'
states) and the training state it started from, and a stopped leg the state it stopped in: the
window's resume check compares what a resume restored with what was saved, directly.
REPORT.json gets the exit status, the seconds, the trace, what the run's metrics.csv says (runs.py's
training_figures: the loss, the evaluations, the training graph's compile time, tokens/s), the
evaluation graph's compile time (the first evaluation's time less the later ones'), what run.json
says it ran with (the attention kernel, the compile mode, the GPU, the CUDA and cuDNN versions),
the MFU, and on CUDA the peak memory allocated and reserved.

Where torch.compile fails on the run's graph, REPORT.json says so (`compile_failed`, the error)
and the process exits COMPILE_FAILED: the stage then runs the rest uncompiled.
REPRO_WINDOW_BREAK_COMPILE=1 forces that on any machine (CI): the run is compiled by a backend
that raises, as inductor does where it cannot build the real graph.
"""

import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
from runs import read_rows, training_figures

import repro.training.loop
from repro.annex.perf.cost import known_peak_flops, model_size
from repro.cli.assembly import main
from repro.config import load_run

COMPILE_FAILED = 3
RECORDED = ("device", "torch_version", "cuda_version", "cudnn_version", "compile")
RECORDED += ("compile_mode", "attention_kernel", "fused_projection", "train_micro_batch")


def digest(tensors) -> str:
    """One hash of tensors' exact bytes (copied to the host): equal only where every bit is."""
    h = hashlib.blake2b(digest_size=16)
    for tensor in tensors:
        h.update(tensor.detach().reshape(-1).cpu().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def training_state(model, optimizer) -> dict:
    """What a resume must restore, as digests: the weights and AdamW's moments and step counts."""
    moments = [s[k] for s in optimizer.state.values() for k in sorted(s) if torch.is_tensor(s[k])]
    return {"weights": digest(model.parameters()), "moments": digest(moments)}


def trace(stop: int) -> dict:
    """Each step's learning rate, data (its micro-batches' token windows) and the generators'
    states, as training takes it; with `stop` >= 0, the training state after that step (what the
    checkpoint saved) and SIGTERM sent; on a resumed leg, the state its first step starts from
    (what the checkpoint restored). The wrapped train_step is the loop's own."""
    take_step, seen = repro.training.loop.train_step, {"steps": {}}
    if stop >= 0:
        seen["stopped_after"] = stop

    def train_step(model, optimizer, batches, step, *args, **kwargs):
        if not seen["steps"]:
            seen.update(first_step=step, restored=training_state(model, optimizer))
        windows = [batches.batches.window("train", step, k) for k in range(batches.accumulation)]
        generators = [torch.get_rng_state()]
        generators += torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
        seen["steps"][step] = {
            "lr": optimizer.param_groups[0]["lr"],
            "data": digest(windows),
            "rng": digest(generators),
        }
        loss = take_step(model, optimizer, batches, step, *args, **kwargs)
        if step == stop:
            seen["at_stop"] = training_state(model, optimizer)
            os.kill(os.getpid(), signal.SIGTERM)
        return loss

    repro.training.loop.train_step = train_step
    return seen


def time_evaluations() -> list[float]:
    """The seconds of each evaluation training takes from here on (each ends in a .item(): the
    device is done), in order."""
    seconds, evaluate = [], repro.training.loop.eval_losses

    def eval_losses(*args, **kwargs):
        began = time.perf_counter()
        result = evaluate(*args, **kwargs)
        seconds.append(time.perf_counter() - began)
        return result

    repro.training.loop.eval_losses = eval_losses
    return seconds


def break_compile() -> None:
    """torch.compile with a backend that fails, as a graph inductor cannot build does."""
    compile_ = torch.compile

    def failing(gm, example_inputs):
        raise RuntimeError("REPRO_WINDOW_BREAK_COMPILE: the backend refused the graph")

    torch.compile = lambda model, **options: compile_(model, backend=failing, dynamic=False)


def compile_error(error: BaseException) -> bool:
    """Whether `error` is torch.compile's (dynamo's or inductor's) rather than the run's."""
    return type(error).__module__.startswith(("torch._dynamo", "torch._inductor"))


def figures(train_args: list[str], evaluations: list[float]) -> dict:
    """The run's figures from its metrics.csv and run.json, with the MFU on a GPU of known peak."""
    option = lambda name: train_args[train_args.index(name) + 1]  # noqa: E731
    out = Path(option("--out"))
    if not (out / "metrics.csv").exists():
        return {}
    result = training_figures(read_rows(out))
    if len(evaluations) > 1:
        later = float(np.median(evaluations[1:]))
        result["eval_compile_time_s"] = evaluations[0] - later
    record = json.loads((out / "run.json").read_text())
    result |= {key: record.get(key) for key in RECORDED}
    if torch.cuda.is_initialized():
        run = load_run(option("--preset"), option("--experiment"))
        peak = known_peak_flops(torch.cuda.get_device_name())
        per_token = model_size(run.model)["flops_per_token"]
        result["mfu"] = result["tokens_per_s"] * per_token / peak if peak else None
        result["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    return result


def leg(train_args: list[str], stop: int) -> tuple[int, dict]:
    traced = trace(stop)
    if os.environ.get("REPRO_WINDOW_BREAK_COMPILE") == "1" and "--no-compile" not in train_args:
        break_compile()
        train_args = [*train_args, "--compile"]
    evaluations = time_evaluations()
    began = time.monotonic()
    try:
        code = main(train_args)
    except Exception as error:
        if not compile_error(error):
            raise
        message = f"{type(error).__name__}: {str(error)[:2000]}"
        return COMPILE_FAILED, {"compile_failed": message}
    result = {"exit": code, "seconds": round(time.monotonic() - began, 1), "trace": traced}
    return code, result | figures(train_args, evaluations)


if __name__ == "__main__":
    report, stop, separator, *train_args = sys.argv[1:]
    assert separator == "--", __doc__
    code, result = leg(train_args, int(stop))
    with open(report, "w") as f:
        json.dump(result, f)
    print(f"train leg: {result}", flush=True)
    sys.exit(code)
