"""The CUDA fast path: `pytest -m gpu tests` runs the tests marked `gpu` (the `cuda` cases below,
skipped without a CUDA device). Each test whose logic is not CUDA's alone runs on CPU too, in
every test run, so that a broken GPU test is found before a GPU runs it."""

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import read_metrics
from devices import COMPILED_ON_CPU, ON_GPU

from repro.cli.assembly import main
from repro.config import load_run
from repro.data.batches import DeviceBatches, inputs_targets, random_batches
from repro.model import chunked_cross_entropy, cross_entropy
from repro.training.loop import build, train_step, with_train_micro_batch
from repro.training.run import train


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=ON_GPU)])
def device(request):
    return torch.device(request.param)


def small_run(experiment="resgelu-lr3e-3"):
    """The smoke preset's model: big enough to exercise every kernel, quick to compile."""
    return load_run("smoke", experiment)


def test_compiled_bf16_step_gives_a_finite_loss_without_syncing(device):
    cuda = device.type == "cuda"
    run = small_run()
    # Compiled and fused where the fast path is (CUDA); eager on CPU, where compiling takes long.
    run = run.with_runtime(compile=cuda, fused_projection=True)
    built = build(run, device)
    model, step_model, optimizer, autocast = built
    assert (step_model is not model) == cuda and model.transformer.h[0].attn.fused
    batches = DeviceBatches(random_batches(with_train_micro_batch(run, built), 4), device)
    step = lambda i: train_step(step_model, optimizer, batches, i, 1.0, autocast)
    step(0)  # compiles
    if not cuda:
        losses = [step(i) for i in (1, 2)]
    else:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")  # any host-device synchronisation now raises
        try:
            losses = [step(i) for i in (1, 2)]
        finally:
            torch.cuda.set_sync_debug_mode("default")
    assert all(math.isfinite(loss.item()) for loss in losses)


def test_prefetched_micro_batches_are_the_index_windows(device):
    run = small_run()
    host = random_batches(run.with_runtime(train_micro_batch=run.train.batch_size // 4), 2)
    device_batches = DeviceBatches(host, device)
    for k, (x, y) in enumerate(device_batches.step(1, range(host.accumulation))):
        ex, ey = inputs_targets(host.window("train", 1, k))
        assert x.device.type == device.type
        assert torch.equal(x.cpu(), ex) and torch.equal(y.cpu(), ey)


@pytest.mark.parametrize("autocast", [False, True])
def test_fused_projection_equals_unfused(device, autocast):
    torch.manual_seed(0)
    run = load_run("paper", "resgelu-lr3e-3")  # the paper's widths: d 768, r 384
    run = replace(run, model=replace(run.model, n_layer=1))  # its first block: the one compared
    model, _, _, _ = build(run.with_runtime(compile=False, fused_projection=False), device)
    attn = model.transformer.h[0].attn
    with torch.no_grad():
        attn.query_mlp.norm_in.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 32, 768, device=device, requires_grad=True)
    results = []
    for fused in (False, True):
        attn.fused = fused
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            q, k, v = attn.project(x)
        out = torch.cat([q, k, v], -1).float()
        grads = torch.autograd.grad(
            out.square().sum(), [x, attn.c_attn.weight, *attn.query_mlp.parameters()]
        )
        results.append([out, *grads])
    tolerance = 2e-2 if autocast else 2e-3  # bf16, or TF32 matmuls (build allows them)
    for plain, fused in zip(*results):
        assert (fused - plain).norm() / plain.norm() < tolerance


def test_a_checkpoint_written_on_the_device_resumes(
    device, token_dir, tiny_indices, tmp_path, monkeypatch
):
    """Two trainings in one process (on CUDA each claims its GPU: the same one, no wait)."""
    cuda = device.type == "cuda"
    run = load_run("tiny", "resgelu-lr3e-3", log_interval=2, device=device.type, compile=cuda)
    whole = train(run, token_dir, tiny_indices, tmp_path / "whole")
    assert whole.status == "completed" and whole.compile == cuda
    assert whole.fused_projection == cuda

    import repro.training.loop as loop_module

    real_step = loop_module.train_step

    def interrupted(*args, **kwargs):
        if args[3] == 7:  # after the checkpoint at step 5
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop_module, "train_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(run, token_dir, tiny_indices, tmp_path / "split")
    monkeypatch.setattr(loop_module, "train_step", real_step)
    record = train(run, token_dir, tiny_indices, tmp_path / "split")
    assert record.status == "completed" and record.last_step == 12
    split, reference = read_metrics(tmp_path / "split"), read_metrics(tmp_path / "whole")
    assert [r["step"] for r in split] == [r["step"] for r in reference]
    for ours, theirs in zip(split, reference):
        if cuda:  # the same run, up to GPU nondeterminism (atomics in flash attention, scatter)
            assert float(ours["train_loss"]) == pytest.approx(float(theirs["train_loss"]), rel=1e-2)
        else:  # bit for bit
            assert ours["train_loss"] == theirs["train_loss"]


def test_the_first_step_of_a_session_is_timed_alone(token_dir, tiny_indices, tmp_path):
    """Compilation and warm-up land in the first row's step time, not in its interval's."""
    run = load_run("tiny", "baseline")
    train(run.with_runtime(log_interval=4), token_dir, tiny_indices, tmp_path)
    times = [r["step_time_s"] for r in read_metrics(tmp_path)]
    assert times[0] != times[1] and times[1] == times[2] == times[3]


def test_bench_with_breakdown(device, tmp_path):
    path = tmp_path / "bench.json"
    cuda = device.type == "cuda"
    # the smoke preset on a GPU, compiled (the preset says not); the tiny one on the CPU
    compile = ["--compile"] if cuda else []
    args = ["bench", "--preset", "smoke" if cuda else "tiny", "--device", device.type, *compile]
    args += ["--experiment", "baseline", "--experiment", "resgelu-lr3e-3"]
    args += ["--steps", "2", "--warmup", "2", "--breakdown", "--json", str(path)]
    assert main(args) == 0
    report = json.loads(path.read_text())
    assert report["device_type"] == device.type and "resgelu-lr3e-3" in report["step_time_ratios"]
    for row in report["fastest"]:
        assert row["compile"] == cuda and math.isfinite(row["loss"])
        assert row["breakdown"].get("matmul", 0) > 0


# The loss where the logits pass 2^31 elements: 48 sequences x 1024 positions x 50304 (about
# 42.7 sequences is the edge). A kernel indexing in 32 bits writes or reads wrong rows past it.
LARGE = SimpleNamespace(rows=48 * 1024, vocab=50304, width=768)
SMALL = SimpleNamespace(rows=2 * 64, vocab=512, width=32)  # the same check, CPU-sized


@pytest.mark.parametrize(
    "device, size",
    [("cpu", SMALL), pytest.param("cuda", LARGE, marks=ON_GPU)],
    ids=["cpu-small", "cuda-above-2^31"],
)
@pytest.mark.parametrize("compiled", [False, True])
def test_the_loss_is_right_past_2_31_logits(device, size, compiled):
    if compiled and device == "cpu" and not COMPILED_ON_CPU:
        pytest.skip("compiling takes minutes here: REPRO_TEST_COMPILED_CPU=1 runs it")
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    x = torch.randn(size.rows, size.width, device=device, dtype=dtype, requires_grad=True)
    weight = (0.02 * torch.randn(size.vocab, size.width, device=device)).to(dtype)
    targets = torch.randint(size.vocab, (size.rows,), device=device)
    whole = lambda x: cross_entropy(F.linear(x, weight), targets)
    whole = torch.compile(whole, dynamic=False) if compiled else whole
    loss = whole(x)
    (grad,) = torch.autograd.grad(loss, x)  # frees the whole logits (about 30 GB on the GPU)
    loss, grad = loss.item(), grad[-1024:].float()  # the last rows: the farthest past 2^31
    chunked = chunked_cross_entropy(x, weight, targets, chunks=16)  # each slice below 2^31
    (reference,) = torch.autograd.grad(chunked, x)
    assert loss == pytest.approx(chunked.item(), rel=1e-3)
    reference = reference[-1024:].float()
    assert (grad - reference).norm() / reference.norm() < 1e-2


def test_after_the_precision_set_up_both_precision_getters_answer():
    """inductor's max-autotune reads torch.get_float32_matmul_precision(), which raises where the
    legacy and the new TF32 settings were mixed. In a process of its own: the setting is global."""
    script = (
        "import torch; from repro.runtime.device import precision; "
        "precision(torch.device('cuda')); "
        "print(torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.fp32_precision, "
        "torch.backends.cuda.matmul.allow_tf32)"
    )
    env = os.environ | {"PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["high", "tf32", "True"]  # TF32 matmuls, by either API
