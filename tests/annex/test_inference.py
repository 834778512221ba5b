"""The key/value-cached forward of repro.model.GPT and `repro bench --inference`."""

import json
from dataclasses import replace

import pytest
import torch

from repro.annex.perf.inference import default_experiments
from repro.cli.assembly import main
from repro.config import QUERY_MODES, load_experiments, load_run
from repro.model import GPT, KVCache


def tiny_model(mode: str, fused: bool) -> GPT:
    config = replace(load_run("tiny", "baseline").model, query_mode=mode)
    torch.manual_seed(0)
    model = GPT(config).double().eval()
    # away from init's exact values: LayerNorm gains 1, so norms matter
    for p in model.parameters():
        p.data += 0.05 * torch.randn_like(p)
    return model.fuse_projections(fused)


def fresh_cache(model: GPT) -> KVCache:
    return KVCache(model.config.n_layer, model.config.block_size)


@pytest.mark.parametrize(
    "mode,fused", [(m, False) for m in QUERY_MODES] + [("residual_gelu", True)]
)
def test_cached_forward_gives_the_full_forwards_logits(mode, fused):
    model = tiny_model(mode, fused)
    idx = torch.randint(
        0, 50257, (2, model.config.block_size), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        full = model(idx)
        cache = fresh_cache(model)
        # a first chunk, a later chunk (the masked path), then one token at a time
        pieces = [model(idx[:, :10], cache=cache), model(idx[:, 10:15], cache=cache)]
        pieces += [model(idx[:, t : t + 1], cache=cache) for t in range(15, idx.shape[1])]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-10)
    assert cache.length == idx.shape[1]


def test_greedy_generation_with_the_cache_is_generation_by_full_forwards():
    model = tiny_model("residual_gelu", True)
    idx = torch.randint(0, 50257, (1, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        cache = fresh_cache(model)
        logits = model(idx, cache=cache, last_only=True)  # a prefill: the last logits only
        torch.testing.assert_close(logits, model(idx)[:, -1:], rtol=0, atol=1e-10)
        # rewound by one position, the cache decodes from the prompt's last token
        cache.length = 7
        generated = model.generate(idx[:, 7:], 3, temperature=0, cache=cache)
        seq = idx  # greedy generation by full forwards
        for _ in range(3):
            seq = torch.cat([seq, model(seq)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(generated, seq[:, 8:])


def test_cache_overflow_is_refused():
    model = tiny_model("linear", False)
    too_long = torch.zeros(1, model.config.block_size + 1, dtype=torch.long)
    with pytest.raises(ValueError, match="exceed the block size"):
        model(too_long, cache=fresh_cache(model))


def test_default_experiments_are_one_per_query_mode():
    chosen = default_experiments(load_experiments())
    assert [e.query_mode for e in chosen] == list(QUERY_MODES)
    assert [e.name for e in chosen] == [
        "baseline",
        "identity",
        "resgelu-lr2.6e-3",
        "baseline-residual_linear",
        "baseline-residual_bottleneck_linear",
    ]


def test_inference_bench_reports_ratios_to_the_baseline(tmp_path, capsys):
    path = tmp_path / "inference.json"
    assert (
        main(
            [
                "bench",
                "--inference",
                "--preset",
                "tiny",
                "--device",
                "cpu",
                "--context",
                "16",
                "--decode-tokens",
                "4",
                "--repeats",
                "2",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    report = json.loads(path.read_text())
    assert (
        report["baseline"] == "baseline"
        and report["device_type"] == "cpu"
        and report["torch_version"]
    )
    rows = {r["query_mode"]: r for r in report["results"]}
    assert set(rows) == set(QUERY_MODES)
    for key in (
        "prefill_time_ratio",
        "decode_time_ratio",
        "prefill_cpu_time_ratio",
        "decode_cpu_time_ratio",
    ):
        assert rows["linear"][key] == {"median": 1.0, "min": 1.0}
    for r in rows.values():
        assert r["prefill_tokens_per_s"] == pytest.approx(16 / r["prefill_s"])
        assert r["decode_ms_per_token"] >= r["decode_ms_per_token_min"] > 0
        assert r["prefill_time_ratio"]["median"] > 0 and r["decode_cpu_time_ratio"]["min"] > 0
        assert len(r["rounds"]["decode_cpu_s"]) == 2
        # keys and values only: the query mode leaves the cache (2 x layers x block x d x 4 bytes)
        assert r["cache_bytes"] == 2 * 2 * 32 * 32 * 4
    out = capsys.readouterr().out
    assert "ms/token" in out and "tokens/s" in out and report["device"] in out


def test_inference_bench_refuses_a_context_longer_than_the_block(capsys):
    assert (
        main(["bench", "--inference", "--preset", "tiny", "--device", "cpu", "--context", "64"])
        == 2
    )
    assert "block size" in capsys.readouterr().err


def test_inference_bench_defaults_fit_the_preset(tmp_path):
    """tiny's block is 32 tokens: the default decode length (32) must shrink to fit it."""
    path = tmp_path / "inference.json"
    argv = ["bench", "--inference", "--preset", "tiny", "--device", "cpu", "--repeats", "1"]
    assert main([*argv, "--experiment", "baseline", "--json", str(path)]) == 0
    report = json.loads(path.read_text())
    assert report["context"] == 32 and report["decode_tokens"] == 16
