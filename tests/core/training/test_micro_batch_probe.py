"""The auto micro-batch (`runtime.train_micro_batch: auto`, repro.training.fit): the sizes it
chooses from measured memory (faked here), a probe that runs out of memory leaving nothing behind,
room left for the optimiser state, and the one graph the probe compiles that training's steps then
run; the GPU's compiled path on CPU where REPRO_TEST_COMPILED_CPU=1; on a GPU (marked `gpu`), the
probe of the paper's model."""

import math
import weakref
from types import SimpleNamespace

import pytest
import torch
from conftest import GiB
from devices import COMPILED_ON_CPU

from repro.config import load_run
from repro.data.batches import DeviceBatches, random_batches
from repro.runtime import device
from repro.training import fit
from repro.training.loop import build, make_optimizer, train_step
from repro.training.run import train


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
    log, collect = [], device.gc.collect
    monkeypatch.setattr(device.gc, "collect", lambda *a: log.append("gc.collect") or collect(*a))
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
    """Of a batch of 24 the probe compiles one size, the largest predicted to fit (here all fit:
    24, past the 12 it measures uncompiled), with the inputs training takes (the same overlapping
    views of a token window); training's steps at that size then run the probe's graph without
    compiling another."""
    from dataclasses import replace

    from torch._dynamo.testing import CompileCounter

    run = load_run("tiny", "resgelu-lr3e-3")
    run = replace(run, train=replace(run.train, batch_size=24)).with_runtime(train_micro_batch=24)
    model, _, optimizer, autocast = build(run, torch.device("cpu"))
    graphs = CompileCounter()  # compiles nothing, counts what dynamo hands a backend
    compiled = torch.compile(model, backend=graphs, dynamic=False)
    torch._dynamo.reset()
    assert fit.auto_micro_batch(compiled, 24, run.model.block_size, autocast) == 24
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
