"""What a run costs: parameters, FLOPs per step, GPU-hours (docs/specification.md §7)."""

from __future__ import annotations

import math
from dataclasses import asdict

from repro.config import ModelConfig, RunConfig
from repro.config.schema import ConfigError
from repro.model import flops_per_token, parameter_counts
from repro.rundir.history import LATER_MODEL_OPTIONS

H100_BF16_PEAK_FLOPS = 989e12  # dense bf16, H100 and H200 SXM

# Dense bf16 peaks from the vendors' datasheets, matched in the device name: specific names first.
KNOWN_PEAK_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100", H100_BF16_PEAK_FLOPS),  # SXM: "NVIDIA H100 80GB HBM3"
    ("H200", H100_BF16_PEAK_FLOPS),  # SXM: "NVIDIA H200"
    ("A100", 312e12),
)


def known_peak_flops(device_name: str) -> float | None:
    return next((peak for known, peak in KNOWN_PEAK_FLOPS if known in device_name), None)


def model_size(config: ModelConfig) -> dict:
    """Parameter counts and training FLOPs per token, without allocating the model."""
    params = parameter_counts(config)
    return {**params, "flops_per_token": flops_per_token(config, params["total_params"])}


def check_bench_report(report, source) -> None:
    def refuse(why: str):
        raise ConfigError(f"{source}: not a `repro bench --json` report ({why})")

    if not isinstance(report, dict) or not isinstance(report.get("fastest"), list):
        refuse("no list of 'fastest' rows")
    for key in ("preset", "device"):
        if key not in report:
            refuse(f"no {key!r}")
    for i, row in enumerate(report["fastest"]):
        if not isinstance(row, dict) or not isinstance(row.get("model"), dict):
            refuse(f"fastest[{i}] names no model")
        if "experiment" not in row:
            refuse(f"fastest[{i}] names no experiment")
        for key in ("tokens_per_s", "flops_per_token"):
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                refuse(f"fastest[{i}].{key}: {value!r} is not a number")
            if not (math.isfinite(value) and value > 0):
                refuse(f"fastest[{i}].{key}: {value!r} is not a positive number")


def bench_throughput(report: dict, run: RunConfig) -> tuple[float, str]:
    """Tokens/s of run's model from a bench report (else its FLOP rate at another width); origin."""
    config = asdict(run.model)
    fastest = lambda rows: max(rows, key=lambda r: r["tokens_per_s"])
    # An older report timed a newer model option at its default.
    timed = lambda r: LATER_MODEL_OPTIONS | r["model"]
    same = [r for r in report["fastest"] if timed(r) == config]
    if same:
        r = fastest(same)
        return r["tokens_per_s"], f"measured ({r['experiment']}, {report['device']})"
    but_mlp = lambda model: {k: v for k, v in model.items() if k != "mlp_hidden"}
    similar = [r for r in report["fastest"] if but_mlp(timed(r)) == but_mlp(config)]
    if not similar:
        raise ConfigError(
            f"the bench report ({report['preset']} on {report['device']}) timed no "
            f"model like {run.experiment.name}'s ({run.preset_name}, "
            f"{config['query_mode']})"
        )
    r = fastest(similar)
    flop_rate = r["tokens_per_s"] * r["flops_per_token"]
    return (
        flop_rate / model_size(run.model)["flops_per_token"],
        f"FLOP/s measured for {r['experiment']} ({report['device']})",
    )


def describe(
    run: RunConfig,
    mfu: float = 0.4,
    peak_flops: float = H100_BF16_PEAK_FLOPS,
    tokens_per_s: float | None = None,
    bench: dict | None = None,
    seeds: int = 1,
) -> dict:
    """Sizes and costs of a run and of `seeds` seeds; GPU-hours from a bench report, else MFU."""
    if seeds < 1:
        raise ConfigError(f"seeds {seeds}: at least 1")
    size = model_size(run.model)
    steps = run.train.max_step + 1
    tokens_per_step = run.tokens_per_step
    per_token = size["flops_per_token"]
    if bench is not None:
        throughput, source = bench_throughput(bench, run)
    elif tokens_per_s:
        throughput, source = tokens_per_s, "measured"
    else:
        throughput = mfu * peak_flops / per_token
        source = f"{mfu:.0%} MFU of {peak_flops / 1e12:.0f} TFLOP/s"
    return {
        "preset": run.preset_name,
        "experiment": run.experiment.name,
        "total_params": size["total_params"],
        "non_embedding_params": size["non_embedding_params"],
        "gate_params": size["gate_params"],
        "tokens_per_step": tokens_per_step,
        "flops_per_token": per_token,
        "flops_per_step": per_token * tokens_per_step,
        "steps": steps,
        "total_flops": per_token * tokens_per_step * steps,
        "tokens_per_s": throughput,
        "mfu": per_token * throughput / peak_flops,
        "throughput_source": source,
        "gpu_hours": tokens_per_step * steps / throughput / 3600,
        "seeds": seeds,
        "gpu_hours_all_seeds": seeds * tokens_per_step * steps / throughput / 3600,
    }
