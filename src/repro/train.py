"""The training loop of one run: schedule, accumulation, evaluation, checkpoints, resume, divergence.

A run directory holds metrics.csv (appended every `log_interval` steps), run.json (what was run, on
what, and how it ended) and ckpt.pt (the latest checkpoint). Starting a run whose directory holds
a checkpoint resumes from it; a finished run is never trained or overwritten again.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import subprocess
import time
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

import repro
from repro.checkpoint import load_checkpoint, save_checkpoint
from repro.config import RunConfig
from repro.data import read_manifest
from repro.indices import Batches, inputs_targets, read_sidecar
from repro.model import GPT, count_parameters

METRICS_COLUMNS = ["step", "lr", "train_loss", "eval_train_loss", "eval_train_std",
                   "eval_val_loss", "eval_val_std", "tokens_seen", "step_time_s", "tokens_per_s"]
FINISHED = ("completed", "diverged")


class RunError(ValueError):
    """A run directory that cannot be (re)started as asked; the message names it."""


def learning_rate(step: int, lr_max: float, lr_min: float, warmup_steps: int, decay_steps: int) -> float:
    """Linear warm-up, then cosine from lr_max to lr_min until decay_steps, then lr_min (SPEC 2)."""
    if step < warmup_steps:
        return lr_max * (step + 1) / (warmup_steps + 1)
    if step > decay_steps:
        return lr_min
    progress = (step - warmup_steps) / (decay_steps - warmup_steps)
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr_max - lr_min)


def make_optimizer(model: GPT, run: RunConfig, fused: bool) -> torch.optim.AdamW:
    """AdamW with weight decay on every parameter of 2 or more dimensions only (SPEC 2)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": run.experiment.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    t = run.preset.train
    return torch.optim.AdamW(groups, lr=run.experiment.lr_max, betas=(t.beta1, t.beta2),
                             eps=t.adam_eps, fused=fused)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def build(run: RunConfig, device: torch.device, compile: bool | str | None = None,
          fused: bool | None = None):
    """The model, the model the steps call (compiled or not), the optimiser and the autocast context.

    The fast path (SPEC 2): TF32 matmuls, bf16 autocast, fused AdamW, torch.compile and the fused
    residual_gelu projection, each by default on CUDA only; SDPA picks flash attention itself.
    """
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(run.preset.train.init_seed)
    model = GPT(run.model_config()).to(device)
    model.fuse_projections(cuda if fused is None else fused)
    optimizer = make_optimizer(model, run, fused=cuda)
    compile = run.preset.compile if compile is None else compile
    # Static shapes: the train and eval micro-batches each get their own specialised graph.
    step_model = torch.compile(model, dynamic=False) if compile is True or (compile == "auto" and cuda) else model
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()
    return model, step_model, optimizer, autocast


def code_version() -> dict:
    """The package version and, in a git checkout, the commit and whether the tree was dirty."""
    src = Path(__file__).resolve().parent
    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    commit = git("rev-parse", "HEAD")
    return {"package_version": repro.__version__, "git_commit": commit,
            "git_dirty": bool(git("status", "--porcelain")) if commit else None}


def run_identity(run: RunConfig) -> dict:
    """What makes two runs the same run: the math, not where the files are or how it is batched."""
    d = json.loads(json.dumps(run.to_dict()))  # a deep, JSON-normal copy
    for key in ("name", "source", "description", "device", "compile", "train_micro_batch", "log_interval"):
        d["preset"].pop(key)
    d["preset"]["train"].pop("micro_batch")  # micro-batching changes speed, not the update
    d["experiment"].pop("description")
    return d


def write_json(path: Path, data: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(partial, path)


class MetricsLog:
    """metrics.csv, one row per optimiser step; rows past a resume point dropped."""

    def __init__(self, path: Path, resume_step: int):
        self.path = path
        rows = []
        if path.exists() and resume_step > 0:
            with open(path, newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["step"]) < resume_step]
        # Rewrite the kept rows under a temporary name first: a crash here loses no finished row.
        partial = path.with_name(path.name + ".partial")
        with open(partial, "w", newline="") as f:
            writer = csv.DictWriter(f, METRICS_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(partial, path)
        self.file = open(path, "a", newline="")
        self.writer = csv.DictWriter(self.file, METRICS_COLUMNS)

    def append(self, row: dict) -> None:
        self.writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in METRICS_COLUMNS})
        self.file.flush()

    def close(self) -> None:
        self.file.close()


@torch.no_grad()
def eval_losses(model, batches: Batches, row: int, n_batches: int, autocast) -> dict:
    """Mean and std of the micro-batch losses on the fixed eval-train and eval-val sequences."""
    model.eval()
    device = next(model.parameters()).device
    result = {}
    for stream in ("eval_train", "eval_val"):
        losses = []  # kept on the device: one synchronisation per stream, not per micro-batch
        for k in range(n_batches):
            x, y = (t.to(device) for t in batches.get(stream, row, k))
            with autocast:
                losses.append(model(x, y)[1].float())
        losses = torch.stack(losses)
        result[f"{stream}_loss"], result[f"{stream}_std"] = losses.mean().item(), losses.std().item()
    model.train()
    return result


class DeviceBatches:
    """Training micro-batches on the device. On CUDA each one is gathered into pinned memory and
    copied on a side stream one micro-batch ahead, so that the copy overlaps the current
    micro-batch's compute and the host never waits for the device."""

    def __init__(self, batches: Batches, device: torch.device):
        self.batches, self.device = batches, device
        self.copy_stream = torch.cuda.Stream(device) if device.type == "cuda" else None

    def _fetch(self, row: int, micro_step: int) -> torch.Tensor:
        window = self.batches.window("train", row, micro_step)
        if self.copy_stream is None:
            return window.to(self.device)
        with torch.cuda.stream(self.copy_stream):
            return window.pin_memory().to(self.device, non_blocking=True)

    def step(self, row: int, accumulation: int):
        """Yield the (inputs, targets) micro-batches of one optimiser step, fetching one ahead."""
        ahead = self._fetch(row, 0)
        for k in range(accumulation):
            window = ahead
            if self.copy_stream is not None:  # compute waits for this copy only, not the next one
                compute = torch.cuda.current_stream(self.device)
                compute.wait_stream(self.copy_stream)
                window.record_stream(compute)  # its memory is the compute stream's to free
            if k + 1 < accumulation:
                ahead = self._fetch(row, k + 1)
            yield inputs_targets(window)


def train_step(model, optimizer, batches: DeviceBatches, step: int, accumulation: int,
               grad_clip: float, autocast) -> torch.Tensor:
    """One optimiser step over `accumulation` micro-batches; returns the mean loss (on device).

    Nothing here waits for the device: the loss stays a device tensor until the caller logs it.
    """
    total = torch.zeros((), device=batches.device)
    for x, y in batches.step(step, accumulation):
        with autocast:
            loss = model(x, y)[1] / accumulation
        loss.backward()
        total += loss.detach()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def train(run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path,
          device: str | None = None, compile: bool | None = None, micro_batch: int | None = None,
          fused: bool | None = None) -> dict:
    """Train one run into out_dir (resuming from its checkpoint if any); return run.json's content.

    device, compile, micro_batch (sequences per forward pass) and fused (the fused residual_gelu
    projection) override the preset's runtime settings; none of them changes the run's identity.
    """
    if micro_batch is not None:
        run = replace(run, preset=run.preset.with_micro_batch(micro_batch))
    out_dir.mkdir(parents=True, exist_ok=True)
    run_json, ckpt_path = out_dir / "run.json", out_dir / "ckpt.pt"
    identity = run_identity(run)
    previous = json.loads(run_json.read_text()) if run_json.exists() else None
    if previous and previous["identity"] != identity:
        raise RunError(f"{out_dir} holds a run of another configuration "
                       f"({previous['preset']}/{previous['experiment']}); refusing to overwrite it")
    if previous and previous["status"] in FINISHED:
        print(f"{out_dir}: already {previous['status']}; nothing to do", flush=True)
        return previous

    dev = resolve_device(device or run.preset.device)
    cuda = dev.type == "cuda"
    batches = Batches.open(data_dir, indices_dir, run.preset)
    manifest = read_manifest(data_dir, verify=False)  # Batches.open verified both
    sidecar = read_sidecar(indices_dir)

    model, step_model, optimizer, autocast = build(run, dev, compile, fused)
    start = 0
    if ckpt_path.exists():
        state = load_checkpoint(ckpt_path, map_location=dev)
        if state["config"]["identity"] != identity:
            raise RunError(f"{ckpt_path} was written by another configuration; refusing to resume")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"{out_dir}: resuming at step {start}", flush=True)

    record = {
        "status": "running", "preset": run.preset.name, "experiment": run.experiment.name,
        "identity": identity, "config": run.to_dict(), "params": count_parameters(model),
        "tokens_per_step": run.preset.tokens_per_step, "last_step": start - 1 if start else None,
        "diverged_step": None, "data": {"dir": str(data_dir), "source": manifest.get("source"),
                                        "token_files": sidecar["token_files"]},
        "indices": {"dir": str(indices_dir), "sha256": sidecar["sha256"]},
        **code_version(), "torch_version": torch.__version__, "python_version": platform.python_version(),
        "device": torch.cuda.get_device_name(dev) if cuda else str(dev), "compile": step_model is not model,
        "fused_projection": model.transformer.h[0].attn.fused, "micro_batch": run.preset.train_micro_batch,
        "started": (previous or {}).get("started") or datetime.now(timezone.utc).isoformat(),
    }
    write_json(run_json, record)
    metrics = MetricsLog(out_dir / "metrics.csv", start)
    try:
        record = _loop(run, model, step_model, optimizer, batches, metrics, autocast, start,
                       record, ckpt_path)
    finally:
        metrics.close()
    record["finished"] = datetime.now(timezone.utc).isoformat()
    write_json(run_json, record)
    return record


def _loop(run, model, step_model, optimizer, batches, metrics, autocast, start, record,
          ckpt_path) -> dict:
    t, ex = run.preset.train, run.experiment
    checkpoint_config = {"identity": record["identity"], "model": record["config"]["model"]}
    device_batches = DeviceBatches(batches, next(model.parameters()).device)
    pending = []  # (row, loss on the device) of the steps since the last flush
    for step in range(start, t.max_step + 1):
        lr = learning_rate(step, ex.lr_max, ex.lr_min, t.warmup_steps, t.decay_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        row = {"step": step, "lr": lr}
        if step % t.eval_interval == 0:  # the model before this step's update, as the authors did
            row |= eval_losses(step_model, batches, step // t.eval_interval, t.eval_batches, autocast)
            print(f"step {step}: eval train {row['eval_train_loss']:.4f}, "
                  f"val {row['eval_val_loss']:.4f}", flush=True)
        if not pending:
            began = time.perf_counter()
        pending.append((row, train_step(step_model, optimizer, device_batches, step,
                                        run.preset.train_accumulation, t.grad_clip, autocast)))
        checkpoint = (step + 1) % t.checkpoint_interval == 0 or step == t.max_step
        # Flush before an evaluation (so that its time stays out of the step times) and before a
        # checkpoint (so that metrics.csv holds every step the checkpoint has taken).
        if checkpoint or (step + 1) % run.preset.log_interval == 0 or (step + 1) % t.eval_interval == 0:
            diverged = _flush(pending, metrics, began, run)
            if diverged is not None:
                return record | {"status": "diverged", "diverged_step": diverged, "last_step": diverged}
            record["last_step"], pending = step, []
        if checkpoint:
            save_checkpoint(ckpt_path, model, optimizer, step + 1, checkpoint_config)
    return record | {"status": "completed"}


def _flush(pending, metrics: MetricsLog, began: float, run: RunConfig) -> int | None:
    """Write the pending steps' rows, waiting for the device once for all of them.

    Returns the first diverged step (its row is the last one written), else None. Step times are
    the interval's wall time shared equally: the device runs the steps back to back.
    """
    losses = torch.stack([loss for _, loss in pending]).tolist()  # the one synchronisation
    step_time = (time.perf_counter() - began) / len(pending)
    ceiling = run.preset.train.loss_ceiling
    for (row, _), loss in zip(pending, losses):
        metrics.append(row | {"train_loss": loss, "tokens_seen": (row["step"] + 1) * run.preset.tokens_per_step,
                              "step_time_s": step_time, "tokens_per_s": run.preset.tokens_per_step / step_time})
        if not math.isfinite(loss) or (ceiling is not None and loss > ceiling):
            print(f"step {row['step']}: train loss {loss} — diverged; ending the run", flush=True)
            return row["step"]
    return None
