"""The speed levers a run can choose (docs/gpu.md, "The levers"): runtime.attention (the SDPA
backend), runtime.compile_mode and runtime.fused_loss. Each is validated by the schema, reaches
what training builds, and is recorded in run.json; the fused loss is the unfused one to rounding
and is off by default, so the paper's runs stay bit for bit the authors'."""

import json
import math
import os
import subprocess
import sys
import types

import pytest
import torch
from config_helpers import write_preset
from conftest import read_metrics, shortened, train_args
from devices import COMPILED_ON_CPU, ON_GPU

import repro.training.loop
from repro.config import ConfigError, load_preset, load_run
from repro.config.options import runtime_overrides
from repro.training.loop import build, make_model
from repro.training.run import train

CPU = torch.device("cpu")


@pytest.mark.parametrize("chunks", [1, 3])
def test_the_fused_loss_is_the_unfused_loss_and_gradients_to_rounding(chunks):
    run = load_run("tiny", "resgelu-lr3e-3")
    model = make_model(run, CPU)
    assert not run.runtime.fused_loss and not model.fused_loss  # the default: the authors' loss
    x = torch.randint(0, run.model.vocab_size, (3, run.model.block_size))
    y = torch.randint(0, run.model.vocab_size, (3, run.model.block_size))
    results = []
    for fused in (None, "repro"):
        model.zero_grad()
        model.fused_loss, model.loss_chunks = fused, chunks
        loss = model(x, y)
        (2.5 * loss).backward()  # the incoming gradient scales the precomputed ones
        results.append([loss.detach(), *(p.grad.clone() for p in model.parameters())])
    for plain, fused in zip(*results):
        assert torch.allclose(fused, plain, rtol=1e-5, atol=1e-7)


# liger-kernel's loss against the plain one, on a GPU, or on the CPU under Triton's interpreter,
# which must be on before Triton is imported: in a process of its own. GPT-2's vocabulary (the
# tiny preset's padded 50304), 48 positions of 32 values; everything in float32.
LIGER_CHECK = """
import sys, torch, torch.nn.functional as F
from repro.model import cross_entropy, liger_cross_entropy
device = sys.argv[1]
torch.manual_seed(0)
x = torch.randn(2, 24, 32, device=device, requires_grad=True)
weight = (0.02 * torch.randn(50304, 32, device=device)).requires_grad_()
targets = torch.randint(0, 50304, (2, 24), device=device)
results = []
for loss in (lambda: cross_entropy(F.linear(x, weight), targets),
             lambda: liger_cross_entropy(x, weight, targets, chunks=1)):
    x.grad = weight.grad = None
    value = loss()
    (2.5 * value).backward()
    results.append([value.detach(), x.grad, weight.grad])
for plain, liger in zip(*results):
    torch.testing.assert_close(liger, plain, rtol=1e-5, atol=1e-7)
"""


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_liger_loss_is_the_plain_loss_and_gradients_to_rounding(device):
    """The same float32 sums in another order (online softmax by blocks of the vocabulary), as
    the package's fused loss: equal to 1e-5 relatively (float32 rounding summed over 50304 logits
    is about 1e-6), gradients of about 1e-4 to 1e-7 absolutely."""
    triton = pytest.importorskip("triton")
    pytest.importorskip("liger_kernel")
    env = os.environ.copy()
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA")
    if device == "cpu":
        # Triton's interpreter runs liger's kernel on CPU tensors from 3.9 (3.9.0 does; 3.6.0,
        # the GPU nodes' own, raises a TypeError in it): there the cuda case checks it.
        if tuple(int(p) for p in triton.__version__.split(".")[:2]) < (3, 9):
            pytest.skip(f"Triton {triton.__version__}'s interpreter cannot run liger's kernel")
        env["TRITON_INTERPRET"] = "1"
    subprocess.run([sys.executable, "-c", LIGER_CHECK, device], env=env, check=True, timeout=600)


def test_liger_where_it_cannot_be_imported_is_one_line(
    capsys, monkeypatch, token_dir, tiny_indices, tmp_path
):
    from conftest import one_line_error

    monkeypatch.setitem(sys.modules, "liger_kernel", None)  # import liger_kernel: ImportError
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", "--fused-loss", "liger")
    one_line_error(capsys, argv, r"runtime.fused_loss: liger needs liger-kernel and Triton")
    assert not (tmp_path / "run" / "run.json").exists()


def test_liger_on_the_cpu_without_triton_s_interpreter_is_one_line(
    capsys, monkeypatch, token_dir, tiny_indices, tmp_path
):
    """Importable (a stand-in: the real package takes seconds to import), but no CUDA."""
    from conftest import one_line_error

    package = "liger_kernel.transformers.functional"
    for name in (package.split(".")[0], package.rsplit(".", 1)[0], package):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    argv = train_args(token_dir, tiny_indices, tmp_path / "run", "--fused-loss", "liger")
    one_line_error(capsys, argv, r"runtime.fused_loss: liger cannot run on cpu here")
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.parametrize(
    ("setting", "kernel"), [(False, None), (True, "repro"), ("repro", "repro"), ("liger", "liger")]
)
def test_the_fused_loss_is_false_or_its_kernel(tmp_path, setting, kernel):
    path = write_preset(tmp_path, lambda d: d["runtime"].update(fused_loss=setting))
    assert load_preset(str(path)).runtime.loss_kernel == kernel


@pytest.mark.parametrize(
    ("argv", "setting"),
    [([], None), (["--fused-loss"], "repro"), (["--fused-loss", "liger"], "liger")]
    + [(["--no-fused-loss"], False)],
)
def test_the_fused_loss_option_names_a_kernel(argv, setting):
    from repro.cli.assembly import build_parser

    args = build_parser().parse_args(train_args("d", "i", "o", *argv))
    assert runtime_overrides(args)["fused_loss"] == setting


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=ON_GPU)])
def test_the_fused_loss_compiled_under_autocast_is_the_unfused_loss(device):
    """As a GPU trains: compiled by inductor, bf16 autocast; against the eager unfused loss."""
    if device == "cpu" and not COMPILED_ON_CPU:
        pytest.skip("compiling takes minutes here: REPRO_TEST_COMPILED_CPU=1 runs it")
    run = load_run("tiny", "resgelu-lr3e-3", loss_chunks=2)
    model = make_model(run, torch.device(device))
    x, y = torch.randint(0, run.model.vocab_size, (2, 2, run.model.block_size), device=device)
    results = []
    for fused, forward in [(None, model), ("repro", torch.compile(model, dynamic=False))]:
        model.zero_grad()
        model.fused_loss = fused
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = forward(x, y)
        loss.backward()
        results.append([loss.detach(), model.lm_head.weight.grad.clone()])
    for plain, fused in zip(*results):
        assert (fused - plain).norm() / plain.norm() < 1e-2  # bf16 matmuls


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
def test_cudnn_attention_is_the_kernel_a_gpu_run_records():
    built = build(load_run("tiny", "baseline", attention="cudnn"), torch.device("cuda"))
    m = load_run("tiny", "baseline").model
    kernel = built.autocast.attention_kernel(
        m.n_head, m.block_size, m.head_size, torch.device("cuda")
    )
    assert kernel == "CUDNN_ATTENTION"


def test_a_run_trains_with_every_lever_and_records_what_it_ran(token_dir, tiny_indices, tmp_path):
    """The math backend and the fused loss: the losses of the default run to rounding; run.json
    says which attention kernel ran, and that no GPU, CUDA or cuDNN took part."""
    run = shortened(load_run("tiny", "resgelu-lr3e-3"), 4)
    plain = train(run, token_dir, tiny_indices, tmp_path / "plain")
    levered = train(
        run.with_runtime(attention="math", fused_loss=True),
        token_dir,
        tiny_indices,
        tmp_path / "levered",
    )
    assert plain.attention_kernel == "FLASH_ATTENTION"  # SDPA's own choice on CPU
    assert levered.attention_kernel == "MATH" and levered.status == "completed"
    record = json.loads((tmp_path / "levered" / "run.json").read_text())
    assert record["config"]["runtime"]["fused_loss"] is True
    assert record["sessions"][0]["fused_loss"] == "repro"
    assert json.loads((tmp_path / "plain" / "run.json").read_text())["fused_loss"] is None
    assert record["sessions"][0]["attention_kernel"] == "MATH"
    assert record["cuda_version"] is record["cudnn_version"] is record["compile_mode"] is None
    for a, b in zip(read_metrics(tmp_path / "plain"), read_metrics(tmp_path / "levered")):
        assert math.isclose(float(a["train_loss"]), float(b["train_loss"]), rel_tol=1e-5)


def test_the_compile_mode_is_the_one_torch_compile_gets(monkeypatch):
    modes = []
    monkeypatch.setattr(repro.training.loop.torch, "compile", lambda m, **kw: modes.append(kw) or m)
    run = load_run("tiny", "baseline", compile=True)
    build(run, CPU)
    build(run.with_runtime(compile_mode="max-autotune-no-cudagraphs"), CPU)
    assert [kw["mode"] for kw in modes] == [None, "max-autotune-no-cudagraphs"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("attention", "cudnn-v9"), ("compile_mode", "max-autotune-plus"), ("fused_loss", "yes")],
)
def test_a_lever_the_schema_does_not_know_is_named_with_the_file(tmp_path, key, value):
    path = write_preset(tmp_path, lambda d: d["runtime"].update({key: value}))
    with pytest.raises(ConfigError, match=rf"^{path}: runtime.{key}: '{value}' is not"):
        load_preset(str(path))


def test_an_attention_backend_that_cannot_run_here_is_one_line(
    capsys, token_dir, tiny_indices, tmp_path
):
    from conftest import one_line_error

    argv = train_args(token_dir, tiny_indices, tmp_path / "run", "--attention", "efficient")
    one_line_error(capsys, argv, r"runtime.attention: efficient cannot run on cpu here")
    assert not (tmp_path / "run" / "run.json").exists()
