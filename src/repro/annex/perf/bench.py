"""`repro bench`: training-step time, throughput and MFU per experiment (docs/performance.md)."""

from __future__ import annotations

import os
import time
from dataclasses import asdict

import torch

from repro.annex.perf.cost import known_peak_flops, model_size
from repro.config import RunConfig
from repro.data.batches import DeviceBatches, random_batches
from repro.runtime.device import free_device_memory, out_of_memory
from repro.runtime.machine import cpu_model
from repro.training.loop import build, train_step, with_train_micro_batch


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fresh_start(device: torch.device) -> None:
    """Forget the previous configuration's compiled graphs and memory."""
    torch._dynamo.reset()  # else graphs pile up to dynamo's recompile limit, then run eagerly
    if device.type == "cuda":
        free_device_memory()
        torch.cuda.reset_peak_memory_stats(device)


class Warmed:
    """A run built and stepped `warmup` times, ready to time more steps; several of them can be
    timed in turns (interleaved: a slow spell of the machine then falls on every one)."""

    def __init__(self, run: RunConfig, device: torch.device, warmup: int, timed: int):
        """`timed`: the most steps this run will be timed for, in all."""
        self.device, self.built = device, build(run, device)
        self.run = with_train_micro_batch(run, self.built)  # training's own choice
        self.batches = DeviceBatches(random_batches(self.run, warmup + timed + 1), device)
        for i in range(warmup):
            self.step(i)
        self.next = warmup
        _synchronize(device)
        self.peak_memory_bytes = (
            torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        )

    def step(self, i: int) -> torch.Tensor:
        model, step_model, optimizer, autocast = self.built
        return train_step(
            step_model, optimizer, self.batches, i, self.run.train.grad_clip, autocast
        )

    def time(self, steps: int) -> tuple[float, float]:
        """Seconds per step over the next `steps` steps, and the last one's loss."""
        _synchronize(self.device)
        began = time.perf_counter()
        for _ in range(steps):
            loss = self.step(self.next)
            self.next += 1
        loss = loss.item()  # waits for the device: the timed steps are complete
        return (time.perf_counter() - began) / steps, loss

    def row(self, seconds: float, loss: float) -> dict:
        """What was timed, as `repro bench` reports it."""
        run, (model, step_model, _, autocast) = self.run, self.built
        compiled = step_model is not model
        return {
            "experiment": run.experiment.name,
            "query_mode": run.experiment.query_mode,
            "model": asdict(run.model),
            "train_micro_batch": run.runtime.train_micro_batch,
            "step_s": seconds,
            "loss": loss,
            "compile": compiled,
            "fused_projection": model.transformer.h[0].attn.fused,
            "loss_chunks": model.loss_chunks,
            "fused_loss": model.fused_loss,
            "compile_mode": run.runtime.compile_mode if compiled else None,
            "attention_kernel": autocast.attention_kernel(
                run.model.n_head, run.model.block_size, run.model.head_size, self.device
            ),
            "peak_memory_bytes": self.peak_memory_bytes,
        }


def time_steps(
    run: RunConfig, device: torch.device, steps: int, warmup: int, breakdown: bool = False
) -> dict:
    """Seconds per optimiser step after `warmup` steps, with the run's runtime settings."""
    _fresh_start(device)
    warmed = Warmed(run, device, warmup, steps + breakdown)
    result = warmed.row(*warmed.time(steps))
    if device.type == "cuda":  # the timed steps' peak too
        result["peak_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    if breakdown:
        result["breakdown"] = profile_step(lambda: warmed.step(warmed.next), device)
    return result


# Step time by kernel (CUDA) or operator (CPU) name: the first category with a fragment in it wins.
CATEGORIES = (
    ("attention", "flash fmha sdpa attention"),
    ("matmul", "gemm nvjet cutlass xmma aten::mm aten::addmm aten::bmm"),
    ("optimizer and clipping", "adam foreach multi_tensor vector_norm lerp addcdiv addcmul"),
    ("embedding and loss", "embedding nll_loss log_softmax cross_entropy"),
    ("fused elementwise and norms (triton)", "triton"),
    (
        "elementwise and norms (eager)",
        "elementwise layer_norm rms_norm gelu fill aten::mul aten::add aten::div aten::sqrt "
        "aten::rsqrt aten::pow aten::mean aten::sum",
    ),
    ("copies", "memcpy memset copy_"),
)


def _category(name: str) -> str:
    name = name.lower()
    return next((c for c, words in CATEGORIES if any(f in name for f in words.split())), "other")


def profile_step(run_step, device: torch.device) -> dict[str, float]:
    cuda = device.type == "cuda"
    activities = [torch.profiler.ProfilerActivity.CPU]
    activities += [torch.profiler.ProfilerActivity.CUDA] if cuda else []
    if not torch.cuda.is_available():
        # A CUDA profiler logs a false gpuGetDeviceCount error on a CPU; a user's level is kept.
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # above kineto's ERROR (4)
    # acc_events: one cycle, without the warning that a second would drop the events.
    with torch.profiler.profile(activities=activities, acc_events=True) as prof:
        run_step()
        _synchronize(device)
    seconds: dict[str, float] = {}
    for event in prof.key_averages():
        if cuda and event.device_type != torch.autograd.DeviceType.CUDA:
            continue  # a CPU operator: its kernels are counted as kernels
        us = event.self_device_time_total if cuda else event.self_cpu_time_total
        if us > 0:
            category = _category(event.key)
            seconds[category] = seconds.get(category, 0.0) + us / 1e6
    return dict(sorted(seconds.items(), key=lambda kv: -kv[1]))


def bench(
    runs: list[RunConfig],
    device: torch.device,
    baseline: str,
    micro_batches: list[int] | None = None,
    steps: int = 10,
    warmup: int = 3,
    peak: float | None = None,
    breakdown: bool = False,
) -> dict:
    """Time every run at every micro-batch; each run's fastest is its result."""
    peak = peak or (known_peak_flops(device_name(device)) if device.type == "cuda" else None)
    rows = []
    for run in runs:
        for mb in micro_batches or [None]:  # None: the run's own
            sized = run.with_runtime(train_micro_batch=mb)
            try:
                row = time_steps(sized, device, steps, warmup, breakdown)
            except RuntimeError as error:  # too large for this GPU: try the others
                if not out_of_memory(error):
                    raise
                said = str(mb or run.runtime.train_micro_batch)  # a number, `auto` or None
                print(f"{run.experiment.name:<22} micro-batch {said:>3}  out of memory", flush=True)
                continue
            per_token = model_size(sized.model)["flops_per_token"]
            row["tokens_per_s"] = sized.tokens_per_step / row["step_s"]
            row["flops_per_token"] = per_token
            row["mfu"] = per_token * row["tokens_per_s"] / peak if peak else None
            rows.append(row)
            print(format_row(row), flush=True)
    fastest = {}
    for row in rows:
        if row["experiment"] not in fastest or row["step_s"] < fastest[row["experiment"]]["step_s"]:
            fastest[row["experiment"]] = row
    return {
        "preset": runs[0].preset_name,
        "device": device_name(device),
        "device_type": device.type,
        "torch_version": torch.__version__,
        "peak_flops": peak,
        "steps": steps,
        "warmup": warmup,
        "tokens_per_step": runs[0].tokens_per_step,
        "results": rows,
        "fastest": list(fastest.values()),
        "step_time_ratios": step_time_ratios(list(fastest.values()), baseline),
    }


def step_time_ratios(fastest: list[dict], baseline: str) -> dict[str, float]:
    base = next((r for r in fastest if r["experiment"] == baseline), None)
    if base is None:
        return {}
    return {
        r["experiment"]: r["step_s"] / base["step_s"]
        for r in fastest
        if r["query_mode"] == "residual_gelu"
    }


def format_row(row: dict) -> str:
    mfu = f"{row['mfu']:6.1%}" if row["mfu"] is not None else "     -"
    return (
        f"{row['experiment']:<22} micro-batch {row['train_micro_batch']:>3}  "
        f"{row['step_s'] * 1e3:10.1f} ms/step  "
        f"{row['tokens_per_s']:12,.0f} tokens/s  MFU {mfu}"
    )


def format_report(report: dict) -> str:
    peak = report["peak_flops"] and f"{report['peak_flops'] / 1e12:.0f} TFLOP/s"
    lines = [
        f"{report['preset']} on {report['device']}, torch {report['torch_version']}, "
        f"bf16 dense peak {peak or 'unknown (give --peak-tflops)'}; {report['steps']} steps timed "
        f"after {report['warmup']}",
        "fastest micro-batch of each experiment:",
    ]
    lines += ["  " + format_row(r) for r in report["fastest"]]
    lines += [
        f"  step time {name} / baseline: {ratio:.3f}"
        for name, ratio in report["step_time_ratios"].items()
    ]
    unit = "kernel" if report["device_type"] == "cuda" else "operator"
    for r in report["fastest"]:
        if "breakdown" in r:
            total = sum(r["breakdown"].values())
            lines.append(f"where one step of {r['experiment']} goes ({unit} time):")
            lines += [
                f"  {category:<38} {s * 1e3:10.1f} ms  {s / total:6.1%}"
                for category, s in r["breakdown"].items()
            ]
    return "\n".join(lines)
