"""The CUDA fast path: `pytest -m gpu tests` runs the tests marked `gpu` (the `cuda` cases below,
skipped without a CUDA device). Each test whose logic is not CUDA's alone runs on CPU too, in
every test run, so that a broken GPU test is found before a GPU runs it."""

import json
import math
import os
import subprocess
import sys
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from test_train import read_metrics

from repro.annex.perf.bench import random_batches
from repro.cli import main
from repro.config import load_run
from repro.data.batches import DeviceBatches, inputs_targets
from repro.model import chunked_cross_entropy, cross_entropy
from repro.runtime import fit
from repro.training.loop import build, make_optimizer, train_step, with_train_micro_batch
from repro.training.run import train

GiB = 2**30
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")]
# The GPU's compiled path on CPU (inductor's C++ kernels), where no GPU is. Compiling takes minutes
# here: run where REPRO_TEST_COMPILED_CPU=1 (benchmarks/gpu/ci.sh, under the GPU node's torch).
COMPILED_ON_CPU = os.environ.get("REPRO_TEST_COMPILED_CPU") == "1"


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
    model, _, _, _ = build(run.with_runtime(compile=False, fused_projection=False), device)
    attn = model.transformer.h[0].attn
    with torch.no_grad():
        attn.query_mlp.norm_in.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 128, 768, device=device, requires_grad=True)
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
    compile = ["--compile"] if device.type == "cuda" else []  # the smoke preset says false
    args = ["bench", "--preset", "smoke", "--device", device.type, *compile]
    args += ["--experiment", "baseline", "--experiment", "resgelu-lr3e-3"]
    args += ["--steps", "2", "--warmup", "2", "--breakdown", "--json", str(path)]
    assert main(args) == 0
    report = json.loads(path.read_text())
    assert report["device_type"] == device.type and "resgelu-lr3e-3" in report["step_time_ratios"]
    for row in report["fastest"]:
        assert row["compile"] == (device.type == "cuda") and math.isfinite(row["loss"])
        assert row["breakdown"].get("matmul", 0) > 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_auto_micro_batch_probes_the_paper_model(capsys):
    """The probe of `runtime.train_micro_batch: auto` on the paper's model, as training runs it
    (compiled): a divisor of 480, and a peak-memory statistic that is no longer the probe's."""
    run = load_run("paper", "resgelu-lr3e-3")
    model, step_model, _, autocast = build(run, torch.device("cuda"))
    chosen = fit.auto_micro_batch(step_model, 480, 1024, autocast)
    assert 480 % chosen == 0 and 12 <= chosen <= 96
    assert all(p.grad is None for p in model.parameters())  # the probe leaves no gradients
    assert torch.cuda.max_memory_allocated() < 4 * GiB  # reset: the weights, not a probe's peak
    with capsys.disabled():
        print(f"\nauto micro-batch of the paper model on {torch.cuda.get_device_name()}: {chosen}")


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
    env = os.environ | {"PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["high", "tf32", "True"]  # TF32 matmuls, by either API


# The auto micro-batch, with fake memory: 2 GiB held whatever the size, and per sequence 1 GiB as
# the steps run the model (compiled), 1.5 GiB uncompiled (which keeps more activations).
def linear_memory(calls, out_of_memory_above=math.inf):
    def measure(n, compiled):
        calls.append((n, "compiled" if compiled else "uncompiled"))
        return None if n > out_of_memory_above else (2 + n * (1 if compiled else 1.5)) * GiB

    return measure


def fitting(calls, limit, batch=480, ranks=1, out_of_memory_above=math.inf):
    measure = linear_memory(calls, out_of_memory_above)
    return fit.largest_fitting(batch, measure, 2 * GiB, limit * GiB, ranks)


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_auto_micro_batch_gives_every_rank_the_same_micro_steps(ranks):
    """On 8 GPUs, 96 of 480 is 5 micro-steps: no equal shares. Each rank's share is divided."""
    chosen = fitting([], 1000, ranks=ranks)
    assert (480 // chosen) % ranks == 0
    assert chosen == {1: 96, 2: 80, 4: 60, 8: 60}[ranks]


def test_auto_micro_batch_needs_a_batch_the_ranks_share():
    with pytest.raises(fit.ReproError, match="480 sequences cannot be shared equally by 7"):
        fitting([], 1000, ranks=7)


def test_auto_micro_batch_runs_one_size_as_the_steps_do_and_predicts_the_rest():
    """One uncompiled pass gives the memory per sequence; the largest size predicted to fit
    (2 + 1.5 n <= 68: 44, so 40) is the one size compiled."""
    calls = []
    assert fitting(calls, 68) == 40
    assert calls == [(12, "uncompiled"), (40, "compiled")]
    calls = []  # the compiled pass runs out of memory after all: the next smaller size
    assert fitting(calls, 68, out_of_memory_above=32) == 32
    assert calls == [(12, "uncompiled"), (40, "compiled"), (32, "compiled")]


def test_auto_micro_batch_edges():
    assert fitting([], 1000, batch=4) == 4  # batches below 12
    calls = []  # not even the first size: the smaller ones, largest first
    assert fitting(calls, 68, out_of_memory_above=9) == 8
    assert calls == [(12, "uncompiled"), (10, "uncompiled"), (8, "uncompiled"), (8, "compiled")]
    with pytest.raises(fit.ReproError, match="no training micro-batch fits"):
        fitting([], 68, out_of_memory_above=0)


@pytest.fixture
def fake_cuda_memory(monkeypatch):
    """torch.cuda's memory calls, logged, with 1 GiB peaks and an 80 GiB device."""
    log, collect = [], fit.gc.collect
    monkeypatch.setattr(fit.gc, "collect", lambda *a: log.append("gc.collect") or collect(*a))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: log.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: GiB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d=None: 0)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d=None: SimpleNamespace(total_memory=80 * GiB)
    )
    return log


class FailsToAllocate(torch.nn.Module):
    """A model whose forward builds its graph, then fails as the GPU does when memory is out."""

    def __init__(self, model, error):
        super().__init__()
        self.model, self.error, self.config = model, error, model.config  # error: made on raising

    def forward(self, x, y):
        loss = self.model(x, y)
        self.graph = weakref.ref(loss)
        loss.backward()  # gradients to be cleared
        raise self.error()


def inductor_wrapped_out_of_memory():
    try:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.21 GiB")
    except torch.cuda.OutOfMemoryError as oom:
        try:
            raise RuntimeError("backend='inductor' raised: autotuning failed") from oom
        except RuntimeError as wrapped:
            return wrapped


@pytest.mark.parametrize(
    "error",
    [
        lambda: torch.cuda.OutOfMemoryError("CUDA out of memory."),
        lambda: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED in `cublasCreate(handle)`"),
        inductor_wrapped_out_of_memory,
    ],
    ids=["torch", "cublas", "inductor"],
)
def test_a_probe_that_runs_out_of_memory_leaves_nothing_behind(error, fake_cuda_memory):
    model, _, _, autocast = build(load_run("tiny", "baseline"), torch.device("cpu"))
    failing = FailsToAllocate(model, error)
    assert fit.peak_memory(failing, 2, 32, autocast) is None
    assert failing.graph() is None  # the failed pass's graph is gone ...
    assert all(p.grad is None for p in model.parameters())  # ... with its gradients
    # ... and collected before the cache is emptied, else empty_cache frees nothing.
    assert fake_cuda_memory[-2:] == ["gc.collect", "empty_cache"]


def test_a_probe_error_that_is_not_memory_is_raised(fake_cuda_memory):
    model, _, _, autocast = build(load_run("tiny", "baseline"), torch.device("cpu"))
    failing = FailsToAllocate(model, lambda: RuntimeError("shapes cannot be multiplied"))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        fit.peak_memory(failing, 2, 32, autocast)


def test_the_probe_resets_the_peak_memory_statistics(fake_cuda_memory, capsys):
    model, _, _, autocast = build(load_run("tiny", "baseline"), torch.device("cpu"))
    assert fit.auto_micro_batch(model, 4, 32, autocast) == 4
    assert fake_cuda_memory[-1] == "reset"  # a peak read later is training's, not the probe's
    out = capsys.readouterr().out
    assert "micro-batch probe: 4 sequences uncompiled, peak 1.0 GiB" in out
    assert "micro-batch probe: 4 sequences as the steps run it, peak 1.0 GiB" in out


def test_the_probe_leaves_room_for_the_optimiser_state():
    """AdamW's moments come after the probe: on an 80 GB GPU the paper's model and the large
    preset's leave them the usual headroom; on a 40 GB one the large preset's take more of it."""
    for preset, gpu, limit in (
        ("paper", 80, 0.85 * 80),
        ("large", 80, 0.85 * 80),
        ("large", 40, 0.95 * 40 - 2 * 2.825),  # its weights: 2.825 GiB
    ):
        weights = fit.weight_bytes(load_run(preset, "baseline").model)
        assert fit.probe_limit(gpu * GiB, weights) / GiB == pytest.approx(limit, abs=0.1)


def test_the_probe_compiles_once_the_graph_training_runs(fake_cuda_memory, capsys):
    """Of a batch of 48 the probe compiles one size, the largest predicted to fit (here all fit:
    48), with the inputs training takes (the same overlapping views of a token window); training's
    steps at that size then run the probe's graph without compiling another."""
    from dataclasses import replace

    from torch._dynamo.testing import CompileCounter

    run = load_run("tiny", "resgelu-lr3e-3")
    run = replace(run, train=replace(run.train, batch_size=48)).with_runtime(train_micro_batch=48)
    model, _, optimizer, autocast = build(run, torch.device("cpu"))
    graphs = CompileCounter()  # compiles nothing, counts what dynamo hands a backend
    compiled = torch.compile(model, backend=graphs, dynamic=False)
    torch._dynamo.reset()
    assert fit.auto_micro_batch(compiled, 48, run.model.block_size, autocast) == 48
    assert graphs.frame_count == 1
    assert capsys.readouterr().out.count("as the steps run it") == 1
    batches = DeviceBatches(random_batches(run, 2), torch.device("cpu"))
    for i in range(2):
        train_step(compiled, optimizer, batches, i, 1.0, autocast)
    assert graphs.frame_count == 1  # training ran the probe's graph


def test_one_training_process_compiles_the_train_and_eval_graphs_once_each(
    token_dir, tiny_indices, tmp_path, monkeypatch
):
    """As on a GPU: a training micro-batch other than evaluation's (the paper's 12), 12 steps
    with evaluations and a checkpoint between them. A third graph would be a recompilation."""
    from torch._dynamo.testing import CompileCounter

    graphs, compile = CompileCounter(), torch.compile
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compile(m, backend=graphs, **kw))
    torch._dynamo.reset()
    run = load_run("tiny", "resgelu-lr3e-3", compile=True, train_micro_batch=4)
    record = train(run, token_dir, tiny_indices, tmp_path)
    assert record.compile and record.status == "completed"
    assert graphs.frame_count == 2


@pytest.mark.gpu
@pytest.mark.skipif(
    not COMPILED_ON_CPU, reason="compiling takes minutes: REPRO_TEST_COMPILED_CPU=1"
)
def test_the_gpu_path_compiled_on_cpu(fake_cuda_memory):
    """What a GPU runs, on CPU: inductor's compiled model with the fused projection and the
    chunked loss, bf16 autocast, the fused AdamW; the auto micro-batch's probe, then training's
    steps on the one graph the probe compiled."""
    from torch._dynamo.utils import counters

    cpu = torch.device("cpu")
    run = load_run("tiny", "resgelu-lr3e-3", compile=True, fused_projection=True, loss_chunks=2)
    run = run.with_runtime(train_micro_batch=4)
    model, step_model, _, _ = build(run, cpu)
    assert step_model is not model and model.transformer.h[0].attn.fused
    optimizer = make_optimizer(model, run, fused_kernel=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16)
    torch._dynamo.reset()
    counters.clear()
    assert fit.auto_micro_batch(step_model, 4, run.model.block_size, autocast) == 4
    assert counters["stats"]["unique_graphs"] == 1  # the probe compiled one size, training's
    batches = DeviceBatches(random_batches(run, 3), cpu)
    step = lambda i: train_step(step_model, optimizer, batches, i, 1.0, autocast)
    losses = [step(i).item() for i in range(3)]
    assert all(math.isfinite(loss) for loss in losses) and losses[2] < losses[0]
    assert counters["stats"]["unique_graphs"] == 1
