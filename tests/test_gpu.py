"""The CUDA fast path (marker `gpu`; skipped without a CUDA device): `pytest -m gpu tests`."""

import json
import math

import pytest
import torch
from test_train import read_metrics

from repro.build import build
from repro.cli import main
from repro.config import load_run
from repro.data.batches import DeviceBatches, inputs_targets
from repro.perf.bench import random_batches
from repro.runtime.fit import fits_on_gpu, largest_fitting
from repro.step import train_step
from repro.train import train

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

CUDA = torch.device("cuda")


def small_run(experiment="resgelu-lr3e-3"):
    """The smoke preset's model: big enough to exercise every kernel, quick to compile."""
    return load_run("smoke", experiment)


def test_compiled_bf16_step_gives_a_finite_loss_without_syncing():
    run = small_run()
    model, step_model, optimizer, autocast = build(run, CUDA)
    assert step_model is not model and model.transformer.h[0].attn.fused  # the CUDA defaults
    batches = DeviceBatches(random_batches(run, 4), CUDA)
    step = lambda i: train_step(step_model, optimizer, batches, i, run.accumulation, 1.0, autocast)
    step(0)  # compiles
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any host-device synchronisation now raises
    try:
        losses = [step(i) for i in (1, 2)]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(math.isfinite(loss.item()) for loss in losses)


def test_prefetched_micro_batches_are_the_index_windows():
    run = small_run()
    host = random_batches(run, 2)
    device_batches = DeviceBatches(host, CUDA)
    for k, (x, y) in enumerate(device_batches.step(1, run.accumulation)):
        ex, ey = inputs_targets(host.window("train", 1, k))
        assert x.is_cuda and torch.equal(x.cpu(), ex) and torch.equal(y.cpu(), ey)


@pytest.mark.parametrize("autocast", [False, True])
def test_fused_projection_equals_unfused_on_gpu(autocast):
    torch.manual_seed(0)
    run = load_run("paper", "resgelu-lr3e-3")  # the paper's widths: d 768, r 384
    model, _, _, _ = build(run.with_runtime(compile=False, fused_projection=False), CUDA)
    attn = model.transformer.h[0].attn
    with torch.no_grad():
        attn.query_mlp.norm_in.weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 256, 768, device=CUDA, requires_grad=True)
    results = []
    for fused in (False, True):
        attn.fused = fused
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            q, k, v = attn.project(x)
        out = torch.cat([q, k, v], -1).float()
        grads = torch.autograd.grad(
            out.square().sum(), [x, attn.c_attn.weight, *attn.query_mlp.parameters()]
        )
        results.append([out, *grads])
    tolerance = 2e-2 if autocast else 2e-3  # bf16, or TF32 matmuls (build allows them)
    for plain, fused in zip(*results):
        assert (fused - plain).norm() / plain.norm() < tolerance


def test_a_checkpoint_written_on_gpu_resumes(token_dir, tiny_indices, tmp_path, monkeypatch):
    run = load_run("tiny", "resgelu-lr3e-3", log_interval=2, device="cuda", compile=True)
    whole = train(run, token_dir, tiny_indices, tmp_path / "whole")
    assert whole["status"] == "completed" and whole["compile"] and whole["fused_projection"]

    import repro.train as train_module

    real_step = train_module.train_step

    def interrupted(*args, **kwargs):
        if args[3] == 7:  # after the checkpoint at step 5
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(run, token_dir, tiny_indices, tmp_path / "split")
    monkeypatch.setattr(train_module, "train_step", real_step)
    record = train(run, token_dir, tiny_indices, tmp_path / "split")
    assert record.status == "completed" and record.last_step == 12
    split, reference = read_metrics(tmp_path / "split"), read_metrics(tmp_path / "whole")
    assert [r["step"] for r in split] == [r["step"] for r in reference]
    for ours, theirs in zip(split, reference):  # the same run, up to GPU nondeterminism (atomics)
        assert float(ours["train_loss"]) == pytest.approx(float(theirs["train_loss"]), rel=1e-2)


def test_bench_on_gpu_with_breakdown(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert (
        main(
            [
                "bench",
                "--preset",
                "smoke",
                "--experiment",
                "baseline",
                "--experiment",
                "resgelu-lr3e-3",
                "--steps",
                "2",
                "--warmup",
                "2",
                "--breakdown",
                "--json",
                str(path),
            ]
        )
        == 0
    )
    report = json.loads(path.read_text())
    assert report["device_type"] == "cuda" and "resgelu-lr3e-3" in report["step_time_ratios"]
    for row in report["fastest"]:
        assert row["compile"] and math.isfinite(row["loss"])
        assert row["breakdown"].get("matmul", 0) > 0


def test_auto_micro_batch_probes_the_paper_model():
    """The probe of `runtime.train_micro_batch: auto` on the paper's model: a divisor of 480."""
    run = load_run("paper", "resgelu-lr3e-3")
    model, _, _, autocast = build(run.with_runtime(compile=False), CUDA)
    chosen = largest_fitting(480, lambda n: fits_on_gpu(model, n, 1024, autocast))
    assert 480 % chosen == 0 and 12 <= chosen <= 96
    assert all(p.grad is None for p in model.parameters())  # the probe leaves no gradients
