"""`repro bench --inference`: prefill throughput and cached decode latency of each query mode."""

from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from repro.config import QUERY_MODES, ConfigError, Experiments, RunConfig
from repro.model import GPT
from repro.perf.bench import _synchronize, device_name
from repro.runtime.fit import check_memory, weight_bytes


def cpu_model() -> str:
    """The CPU's model name as lscpu prints it ("" where /proc/cpuinfo has none)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), ""
    )


class KVCache:
    """Keys and values of every layer, (B, n_head, block_size, head_size) each, filled to `length`.

    Only k and v are cached: the query, linear or not, is needed once, for the token that makes it,
    so a nonlinear query changes the work per token but not the cache.
    """

    def __init__(self, n_layer: int):
        self.k: list[torch.Tensor | None] = [None] * n_layer
        self.v: list[torch.Tensor | None] = [None] * n_layer
        self.length = 0  # positions filled; set it lower to rewind (later entries are overwritten)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor, block_size: int):
        """Write k, v (B, H, T, hs) at [length, length + T); return all cached up to there."""
        if self.k[layer] is None:  # allocated at first use: then dtype and device are the model's
            shape = (k.shape[0], k.shape[1], block_size, k.shape[3])
            self.k[layer] = k.new_empty(shape)
            self.v[layer] = v.new_empty(shape)
        end = self.length + k.shape[2]
        self.k[layer][:, :, self.length : end] = k
        self.v[layer][:, :, self.length : end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


def _attend(attn, x, cache: KVCache, layer: int):
    """CausalSelfAttention.forward with the keys and values of earlier positions from the cache."""
    B, T, C = x.shape
    heads = lambda t: t.view(B, T, attn.config.n_head, attn.config.head_size).transpose(1, 2)
    q, k, v = map(
        heads, attn.project(x)
    )  # the model's own projection: every query mode, fused or not
    start = cache.length
    k, v = cache.append(layer, k, v, attn.config.block_size)
    if T == 1 or start == 0:  # one new token sees everything; a first chunk is plainly causal
        y = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1)
    else:  # a later chunk: query i (at position start + i) sees keys up to start + i
        mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(start)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return attn.c_proj(y.transpose(1, 2).reshape(B, T, C))


def forward_cached(model: GPT, idx: torch.Tensor, cache: KVCache, last_only: bool = False):
    """Logits (B, T, vocab) of tokens idx (B, T) following the cache's positions; fills the cache.

    With last_only, only the last position's logits (B, 1, vocab): all that generation needs, and
    it spares the prefill a (T, d) x (d, vocab) matmul.
    """
    T, start = idx.shape[1], cache.length
    if start + T > model.config.block_size:
        raise ValueError(f"{start + T} positions exceed the block size {model.config.block_size}")
    tr = model.transformer
    x = tr.wte(idx) + tr.wpe(torch.arange(start, start + T, device=idx.device))
    for layer, block in enumerate(tr.h):
        x = x + _attend(block.attn, block.ln_1(x), cache, layer)
        x = x + block.mlp(block.ln_2(x))
    cache.length = start + T
    x = x[:, -1:] if last_only else x
    return model.lm_head(tr.ln_f(x))


def prefill(model: GPT, idx: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
    """One forward of the whole prompt into a fresh cache: the last position's logits, the cache."""
    cache = KVCache(model.config.n_layer)
    return forward_cached(model, idx, cache, last_only=True), cache


def decode(model: GPT, token: torch.Tensor, cache: KVCache, tokens: int) -> torch.Tensor:
    """Greedy generation from token (B, 1): `tokens` forwards of one token each; the ids made."""
    out = []
    for _ in range(tokens):
        # argmax stays on the device: each step waits for the last, as in generation, with no sync
        token = forward_cached(model, token, cache)[:, -1].argmax(-1, keepdim=True)
        out.append(token)
    return torch.cat(out, dim=1)


def default_experiments(experiments: Experiments, group: str = "table1") -> list:
    """The baseline, then the first experiment of each other query mode in the group or identity.

    A mode no experiment trains (residual_linear) gets the baseline with that query mode: the
    optimiser settings play no part in inference.
    """
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
    """Wall time, and this process's CPU time: a shared CPU's other jobs add to the first."""
    _synchronize(device)
    return time.perf_counter(), time.process_time()


def _time_round(model: GPT, idx: torch.Tensor, decode_tokens: int, device: torch.device):
    """Seconds (wall, CPU) of a prefill of idx and per token of decoding its end; cache bytes."""
    began = _clocks(device)
    _, cache = prefill(model, idx)
    prefilled = _clocks(device)
    # Rewind to context - decode_tokens: those keys and values are exactly a prefill of the shorter
    # prompt (causality), so the decoded tokens end at the full context.
    cache.length = start = idx.shape[1] - decode_tokens
    decode(model, idx[:, start : start + 1], cache, decode_tokens)
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


def _model(run: RunConfig, device: torch.device, fused: bool | None) -> GPT:
    what = f"the model of {run.experiment.name} at preset {run.preset.name}"
    check_memory(what, weight_bytes(run.model), device)
    torch.manual_seed(run.preset.train.init_seed)
    model = GPT(run.model).to(device).eval()
    return model.fuse_projections(device.type == "cuda" if fused is None else fused)


def inference_bench(
    runs: list[RunConfig],
    device: torch.device,
    baseline: str,
    context: int | None = None,
    decode_tokens: int = 32,
    repeats: int = 3,
    batch: int = 1,
    fused: bool | None = None,
) -> dict:
    """Per run: prefill of `context` tokens and decode of the last `decode_tokens` of them.

    Rounds are interleaved (every model once per round, after one untimed warm-up round) so that a
    drift of the machine's speed falls on all modes alike. Ratios are to the run of the experiment
    named `baseline` (the experiments file's), round by round; the median over rounds is reported.
    """
    block = runs[0].preset.model.block_size
    context = context or block
    if not decode_tokens < context <= block:
        raise ConfigError(
            f"--inference needs --decode-tokens ({decode_tokens}) < --context ({context}) "
            f"<= the block size ({block})"
        )
    models = [_model(run, device, fused) for run in runs]
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
    """Time over the baseline's: median of the rounds' paired ratios; fastest over the fastest."""
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
    name = device_name(device) if device.type == "cuda" else cpu_model() or device_name(device)
    return {
        "preset": runs[0].preset.name,
        "device": name,
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
