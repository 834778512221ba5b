"""What a run costs: parameters, tokens and FLOPs per step, and estimated GPU-hours (SPEC 7)."""

from __future__ import annotations

import torch

from repro.config import RunConfig
from repro.model import GPT, count_parameters, flops_per_token

H100_BF16_PEAK_FLOPS = 989e12  # dense bf16, H100 and H200 SXM


def describe(run: RunConfig, mfu: float = 0.4, peak_flops: float = H100_BF16_PEAK_FLOPS,
             tokens_per_s: float | None = None) -> dict:
    """Sizes and costs of one run. GPU-hours from a measured throughput when given, else from MFU."""
    config = run.model_config()
    with torch.device("meta"):  # counts parameters without allocating a 124M model
        params = count_parameters(GPT(config))
    steps = run.preset.train.max_step + 1
    tokens_per_step = run.preset.tokens_per_step
    per_token = flops_per_token(config, params["total_params"])
    throughput = tokens_per_s if tokens_per_s else mfu * peak_flops / per_token
    return {
        "preset": run.preset.name, "experiment": run.experiment.name,
        **params,
        "tokens_per_step": tokens_per_step,
        "flops_per_token": per_token,
        "flops_per_step": per_token * tokens_per_step,
        "steps": steps,
        "total_flops": per_token * tokens_per_step * steps,
        "tokens_per_s": throughput,
        "throughput_source": "measured" if tokens_per_s else f"{mfu:.0%} MFU of {peak_flops / 1e12:.0f} TFLOP/s",
        "gpu_hours": tokens_per_step * steps / throughput / 3600,
    }
