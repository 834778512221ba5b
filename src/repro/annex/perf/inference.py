"""`repro bench --inference`: prefill throughput and cached decode latency of each query mode."""

from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from dataclasses import replace

import torch

from repro.annex.perf.bench import _synchronize, device_name
from repro.config import QUERY_MODES, ConfigError, Experiments, RunConfig
from repro.model import GPT, KVCache
from repro.runtime.device import check_memory
from repro.training.fit import weight_bytes
from repro.training.loop import make_model


def default_experiments(experiments: Experiments, group: str = "table1") -> list:
    base = experiments[experiments.baseline]
    chosen = {base.query_mode: base}
    for e in experiments.group(group) + [experiments["identity"]]:
        chosen.setdefault(e.query_mode, e)
    for mode in QUERY_MODES:
        chosen.setdefault(
            mode,
            replace(
                base,
                name=f"{base.name}-{mode}",
                query_mode=mode,
                description=f"{base.name} with query_mode {mode}",
            ),
        )
    return [chosen[mode] for mode in QUERY_MODES]


def _clocks(device: torch.device) -> tuple[float, float]:
    """Wall time, and this process's CPU time (which a shared CPU's other jobs leave out)."""
    _synchronize(device)
    return time.perf_counter(), time.process_time()


def _time_round(model: GPT, idx: torch.Tensor, decode_tokens: int, device: torch.device):
    """Seconds (wall, CPU) of a prefill and per decoded token; cache bytes."""
    began = _clocks(device)
    cache = KVCache(model.config.n_layer, model.config.block_size)
    model(idx, cache=cache, last_only=True)  # the prefill: the last position's logits only
    prefilled = _clocks(device)
    # Rewound keys and values equal the shorter prompt's prefill; argmax stays on device: no sync.
    cache.length = start = idx.shape[1] - decode_tokens
    model.generate(idx[:, start : start + 1], decode_tokens, temperature=0, cache=cache)
    decoded = _clocks(device)
    seconds = {
        f"{phase}_{clock}": (b[i] - a[i]) / n
        for phase, a, b, n in (
            ("prefill", began, prefilled, 1),
            ("decode", prefilled, decoded, decode_tokens),
        )
        for i, clock in enumerate(("s", "cpu_s"))
    }
    return seconds, cache.nbytes()


TIMES = ("prefill_s", "decode_s", "prefill_cpu_s", "decode_cpu_s")


def inference_bench(
    runs: list[RunConfig],
    device: torch.device,
    baseline: str,
    context: int | None = None,
    decode_tokens: int = 32,
    repeats: int = 3,
    batch: int = 1,
) -> dict:
    """Prefill and decode per run, in interleaved rounds so drift falls on all; median ratios."""
    block = runs[0].model.block_size
    context = context or block
    if not decode_tokens < context <= block:
        raise ConfigError(
            f"--inference needs --decode-tokens ({decode_tokens}) < --context ({context}) "
            f"<= the block size ({block})"
        )
    for run in runs:  # refused before allocating: the weights alone, no optimiser or gradients
        what = f"the model of {run.experiment.name} at preset {run.preset_name}"
        check_memory(what, weight_bytes(run.model), device)
    models = [make_model(run, device).eval() for run in runs]
    idx = torch.randint(0, 50257, (batch, context), generator=torch.Generator().manual_seed(0)).to(
        device
    )
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    )
    times = [{key: [] for key in TIMES} for _ in runs]
    with torch.inference_mode(), autocast:
        for round in range(repeats + 1):
            for model, t in zip(models, times):
                seconds, t["cache_bytes"] = _time_round(model, idx, decode_tokens, device)
                if round > 0:  # round 0 warms up the allocator and the kernels
                    for key in TIMES:
                        t[key].append(seconds[key])
    return _report(runs, models, times, device, baseline, context, decode_tokens, repeats, batch)


def _ratios(times: list[float], baseline: list[float]) -> dict[str, float]:
    """Time over the baseline's: median of paired ratios; fastest over fastest."""
    return {
        "median": statistics.median(a / b for a, b in zip(times, baseline)),
        "min": min(times) / min(baseline),
    }


def _report(runs, models, times, device, baseline, context, decode_tokens, repeats, batch) -> dict:
    base = next((i for i, run in enumerate(runs) if run.experiment.name == baseline), None)
    rows = []
    for run, model, t in zip(runs, models, times):
        prefill_s = statistics.median(t["prefill_s"])
        row = {
            "experiment": run.experiment.name,
            "query_mode": run.experiment.query_mode,
            "fused_projection": model.transformer.h[0].attn.fused,
            "prefill_s": prefill_s,
            "prefill_s_min": min(t["prefill_s"]),
            "prefill_tokens_per_s": batch * context / prefill_s,
            "decode_ms_per_token": 1e3 * statistics.median(t["decode_s"]),
            "decode_ms_per_token_min": 1e3 * min(t["decode_s"]),
            "cache_bytes": t["cache_bytes"],
            "rounds": {key: t[key] for key in TIMES},
        }
        for key in TIMES if base is not None else ():  # > 1: slower than the baseline
            row[key.replace("_s", "_time_ratio")] = _ratios(t[key], times[base][key])
        rows.append(row)
    return {
        "preset": runs[0].preset_name,
        "device": device_name(device),
        "device_type": device.type,
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "dtype": "bf16 autocast" if device.type == "cuda" else "fp32",
        "batch": batch,
        "context": context,
        "decode_tokens": decode_tokens,
        "repeats": repeats,
        "baseline": runs[base].experiment.name if base is not None else None,
        "results": rows,
    }


def _format_ratio(row: dict, key: str) -> str:
    return (
        f"x{row[key]['median']:6.3f} ({row[key]['min']:.3f})" if key in row else "      -        "
    )


def format_report(report: dict) -> str:
    r = report
    header = (
        f"inference, {r['preset']} preset on {r['device']} ({r['device_type']}, "
        f"{r['threads']} threads), torch {r['torch_version']}, {r['dtype']}, batch {r['batch']}: "
        f"prefill of {r['context']} tokens, "
        f"decode of the last {r['decode_tokens']} with the cache; median (min) of {r['repeats']} "
        f"interleaved rounds; ratios are time over {r['baseline']}'s: "
        f"median of the rounds' (fastest's)"
    )
    lines = [header]
    for row in r["results"]:
        lines.append(
            f"  {row['experiment']:<24} {row['query_mode']:<15} "
            f"prefill {row['prefill_tokens_per_s']:>10,.0f} tokens/s "
            f"{_format_ratio(row, 'prefill_time_ratio')}   "
            f"decode {row['decode_ms_per_token']:8.2f} ({row['decode_ms_per_token_min']:.2f}) "
            f"ms/token {_format_ratio(row, 'decode_time_ratio')}   "
            f"cache {row['cache_bytes'] / 2**20:.2f} MiB"
        )
        if r["device_type"] == "cpu":
            lines.append(
                f"  {'':<24} {'':<15} CPU time over the baseline's: prefill "
                f"{_format_ratio(row, 'prefill_cpu_time_ratio')}  "
                f"decode {_format_ratio(row, 'decode_cpu_time_ratio')}"
            )
    return "\n".join(lines)
