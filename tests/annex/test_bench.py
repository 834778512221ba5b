"""`repro bench` and the GPU-hours `repro describe` estimates from it (docs/specification.md §7)."""

import gc
import json
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import torch

from repro.annex.perf import bench
from repro.annex.perf.cost import known_peak_flops, model_size
from repro.cli.assembly import main
from repro.config import load_run
from repro.errors import ReproError
from repro.rundir.history import LATER_MODEL_OPTIONS


def test_known_peaks_are_dense_bf16():
    assert known_peak_flops("NVIDIA H200") == known_peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert known_peak_flops("NVIDIA H100 PCIe") == 756e12
    assert known_peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert known_peak_flops("Some Future GPU") is None


@pytest.fixture(scope="module")
def tiny_bench(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    assert (
        main(
            [
                "bench",
                "--preset",
                "tiny",
                "--device",
                "cpu",
                "--experiment",
                "baseline",
                "--experiment",
                "resgelu-lr3e-3",
                "--train-micro-batch",
                "2",
                "4",
                "--steps",
                "1",
                "--warmup",
                "1",
                "--peak-tflops",
                "1",
                "--breakdown",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    return json.loads(path.read_text())


def test_bench_times_each_experiment_at_each_micro_batch(tiny_bench, capsys):
    report = tiny_bench
    assert [(r["experiment"], r["train_micro_batch"]) for r in report["results"]] == [
        ("baseline", 2),
        ("baseline", 4),
        ("resgelu-lr3e-3", 2),
        ("resgelu-lr3e-3", 4),
    ]
    assert [r["experiment"] for r in report["fastest"]] == ["baseline", "resgelu-lr3e-3"]
    for r in report["results"]:
        assert r["step_s"] > 0 and r["tokens_per_s"] == pytest.approx(4 * 32 / r["step_s"])
        assert r["mfu"] == pytest.approx(r["flops_per_token"] * r["tokens_per_s"] / 1e12)
        assert not r["compile"] and not r["fused_projection"]  # the CPU defaults
        assert sum(r["breakdown"].values()) > 0
    fastest = {r["experiment"]: r for r in report["fastest"]}
    assert report["step_time_ratios"]["resgelu-lr3e-3"] == pytest.approx(
        fastest["resgelu-lr3e-3"]["step_s"] / fastest["baseline"]["step_s"]
    )
    assert report["device_type"] == "cpu" and report["peak_flops"] == 1e12


def test_describe_uses_the_bench_report(tiny_bench, tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(tiny_bench))
    assert (
        main(["describe", "--preset", "tiny", "--group", "table1", "--bench", str(path), "--json"])
        == 0
    )
    rows = {r["experiment"]: r for r in json.loads(capsys.readouterr().out)}
    fastest = {r["experiment"]: r for r in tiny_bench["fastest"]}
    assert rows["baseline"]["tokens_per_s"] == fastest["baseline"]["tokens_per_s"]
    assert (
        rows["resgelu-lr2.6e-3"]["tokens_per_s"] == fastest["resgelu-lr3e-3"]["tokens_per_s"]
    )  # same model
    # mlp4.75 was not timed: the baseline's FLOP rate, over its own FLOPs per token.
    flop_rate = fastest["baseline"]["tokens_per_s"] * fastest["baseline"]["flops_per_token"]
    assert rows["mlp4.75"]["tokens_per_s"] == pytest.approx(
        flop_rate / rows["mlp4.75"]["flops_per_token"]
    )
    assert "FLOP/s measured for baseline" in rows["mlp4.75"]["throughput_source"]


def test_describe_reads_a_bench_report_written_before_the_later_model_options(
    tiny_bench, tmp_path, capsys
):
    """Its models have no attention_gate or qk_norm: it timed them at their defaults."""
    for row in tiny_bench["fastest"]:
        row["model"] = {k: v for k, v in row["model"].items() if k not in LATER_MODEL_OPTIONS}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(tiny_bench))
    args = ["describe", "--preset", "tiny", "--experiment", "baseline", "--bench", str(path)]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["throughput_source"].startswith("measured (baseline")


def fake_report(tokens_per_s: dict) -> dict:
    """A bench report of the paper preset as `repro bench --json` writes it, given throughputs."""
    fastest = []
    for name, throughput in tokens_per_s.items():
        config = load_run("paper", name).model
        fastest.append(
            {
                "experiment": name,
                "query_mode": config.query_mode,
                "model": asdict(config),
                "tokens_per_s": throughput,
                "flops_per_token": model_size(config)["flops_per_token"],
            }
        )
    return {"preset": "paper", "device": "NVIDIA H200", "fastest": fastest}


def test_describe_estimates_gpu_hours_of_table1_and_the_sweep(tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(fake_report({"baseline": 491_520, "resgelu-lr3e-3": 491_520 / 1.5})))
    assert main(["describe", "--preset", "paper", "--group", "table1", "--bench", str(path)]) == 0
    # 60003 steps: 1 s each for baseline, 1.5 s for residual_gelu; mlp4.75 at the baseline's FLOP/s.
    mlp = model_size(load_run("paper", "mlp4.75").model)["flops_per_token"]
    base = model_size(load_run("paper", "baseline").model)["flops_per_token"]
    expected = 60003 / 3600 * (1 + 2 * mlp / base + 2 * 1.5)
    out = capsys.readouterr().out
    assert f"table1: 5 runs, {expected:.1f} GPU-hours at the throughputs of {path}" in out
    assert main(["describe", "--preset", "paper", "--group", "figure2", "--bench", str(path)]) == 0
    assert "figure2: 20 runs" in capsys.readouterr().out


def test_describe_at_a_cpu_preset_gives_a_time_it_can_show(capsys):
    """A smoke run is seconds of a GPU: not rounded to "0.0 GPU-hours", which reads as free."""
    assert main(["describe", "--preset", "smoke", "--group", "table1"]) == 0
    out = capsys.readouterr().out
    assert "0.0 GPU-hours" not in out and " 0.0 " not in out, out
    assert "table1: 5 runs, under 0.1 GPU-hours at 40% MFU" in out, out


def test_describe_refuses_a_bench_of_another_size(tiny_bench, tmp_path, capsys):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(tiny_bench))
    assert (
        main(["describe", "--preset", "paper", "--experiment", "baseline", "--bench", str(path)])
        == 2
    )
    assert "timed no model like baseline's" in capsys.readouterr().err


# The bench loop around time_steps, on CPU with time_steps and the GPU calls replaced.
def fake_time_steps(calls, fails_at=None, error=None):
    def time_steps(run, device, *args):
        mb = run.runtime.train_micro_batch
        calls.append(mb)
        if mb == fails_at:
            raise error
        e = run.experiment
        return {"experiment": e.name, "query_mode": e.query_mode, "train_micro_batch": mb} | {
            "step_s": 1.0,
            "loss": 5.0,
        }

    return time_steps


@pytest.mark.parametrize(
    "error",
    [
        torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.21 GiB"),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    ],
    ids=["torch", "cublas"],
)
def test_bench_skips_a_micro_batch_that_fails_to_allocate(error, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(bench, "time_steps", fake_time_steps(calls, 4, error))
    run = load_run("tiny", "baseline")
    report = bench.bench([run], torch.device("cpu"), "baseline", micro_batches=[2, 4, 1], peak=1)
    assert calls == [2, 4, 1]
    assert [r["train_micro_batch"] for r in report["results"]] == [2, 1]
    assert "baseline               micro-batch   4  out of memory" in capsys.readouterr().out


def test_bench_raises_an_error_that_is_not_memory(monkeypatch):
    error = RuntimeError("mat1 and mat2 shapes cannot be multiplied")
    monkeypatch.setattr(bench, "time_steps", fake_time_steps([], 2, error))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        bench.bench([load_run("tiny", "baseline")], torch.device("cpu"), "baseline", [2], peak=1)


def test_bench_times_the_micro_batch_training_would_choose(monkeypatch):
    """By default each run is timed at the micro-batch training resolves: the one function both
    call (repro.training.loop.with_train_micro_batch; `auto` on CUDA is the probe's choice)."""
    resolved = []

    def with_train_micro_batch(run, built):
        resolved.append(run.runtime.train_micro_batch)
        return run.with_runtime(train_micro_batch=4)

    monkeypatch.setattr(bench, "with_train_micro_batch", with_train_micro_batch)
    run = load_run("tiny", "baseline").with_runtime(train_micro_batch="auto")
    report = bench.bench([run], torch.device("cpu"), "baseline", steps=1, warmup=0, peak=1)
    assert resolved == ["auto"] and report["results"][0]["train_micro_batch"] == 4


def test_a_fresh_start_collects_garbage_before_emptying_the_cache(monkeypatch):
    """empty_cache frees only blocks nothing references: the failed configuration's traceback
    and reference cycles must be collected first."""
    log = []
    monkeypatch.setattr(gc, "collect", lambda: log.append("gc.collect"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: log.append("reset"))
    bench._fresh_start(torch.device("cuda"))
    assert log == ["gc.collect", "empty_cache", "reset"]


def test_time_steps_with_a_chosen_attention_kernel():
    """The pairs' attention pair and the levers: SDPA held to runtime.attention's backend (on
    CPU, math), which the row names; one that cannot run here is one clear error."""
    run = load_run("tiny", "baseline")
    row = bench.time_steps(run.with_runtime(attention="math"), torch.device("cpu"), 1, 1)
    assert row["attention_kernel"] == "MATH" and row["step_s"] > 0
    with pytest.raises(ReproError, match="runtime.attention: cudnn cannot run on cpu"):
        bench.time_steps(run.with_runtime(attention="cudnn"), torch.device("cpu"), 1, 1)


def test_auto_on_a_gpu_is_the_probes_choice_for_the_model_the_steps_call(monkeypatch, capsys):
    """repro.training.loop.with_train_micro_batch, training's and the bench's one resolver: `auto`
    on a GPU
    probes the compiled model; a number stays; None is the evaluation's micro-batch."""
    import repro.training.loop

    class OnGpu(torch.nn.Module):  # stands for a model on a GPU: the probe itself is replaced
        def parameters(self, recurse=True):
            yield SimpleNamespace(device=torch.device("cuda"))

    probed = []
    monkeypatch.setattr(
        repro.training.loop, "auto_micro_batch", lambda m, *a: probed.append((m, a)) or 4
    )
    model, step_model = OnGpu(), OnGpu()
    built = repro.training.loop.Built(model, step_model, None, "autocast")
    auto = load_run("tiny", "baseline", train_micro_batch="auto")
    assert repro.training.loop.with_train_micro_batch(auto, built).runtime.train_micro_batch == 4
    assert probed == [(step_model, (4, 32, "autocast", 1))]  # batch 4, block 32, one rank
    assert "baseline: training micro-batch 4 (auto)" in capsys.readouterr().out
    fixed = auto.with_runtime(train_micro_batch=1)
    assert repro.training.loop.with_train_micro_batch(fixed, built).runtime.train_micro_batch == 1
    default = load_run("tiny", "baseline")
    assert default.runtime.train_micro_batch is None
    assert repro.training.loop.with_train_micro_batch(default, built).runtime.train_micro_batch == 2
    assert len(probed) == 1
