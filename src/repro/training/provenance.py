"""The record of what a training process runs (run.json's provenance): the run's configuration,
its data, the code, and the machine, built in one place for repro.training.run."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path

import torch

from repro.config import RunConfig
from repro.data.batches import Batches
from repro.model import GPT, count_parameters
from repro.rundir import RunRecord, code_version
from repro.runtime import allocator, distributed


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def run_record(
    run: RunConfig,
    model: GPT,
    step_model: torch.nn.Module,
    batches: Batches,
    data_dir: Path,
    indices_dir: Path,
    start: int,
    previous: RunRecord | None,
) -> RunRecord:
    """run.json of a run starting (or resuming) at step `start`: `run` with its training
    micro-batch resolved, the model and compiled model it trains, the data `batches` read (from
    data_dir and indices_dir), and
    the sessions of `previous`, the record of the run so far (None for a new run)."""
    device = next(model.parameters()).device
    record = RunRecord(
        status="running",
        preset=run.preset_name,
        experiment=run.experiment.name,
        identity=run.identity(),
        config=run.to_dict(),
        params=count_parameters(model),
        tokens_per_step=run.tokens_per_step,
        last_step=start - 1 if start else None,
        data={
            "dir": str(data_dir),
            "source": batches.manifest.get("source"),
            "token_files": batches.sidecar["token_files"],
        },
        indices={"dir": str(indices_dir), "sha256": batches.sidecar["sha256"]},
        **code_version(),
        torch_version=torch.__version__,
        python_version=platform.python_version(),
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else str(device),
        compile=hasattr(step_model, "_orig_mod"),  # torch.compile's wrapper
        world_size=distributed.size(),
        fused_projection=model.transformer.h[0].attn.fused,
        train_micro_batch=run.runtime.train_micro_batch,
        torch_threads=torch.get_num_threads(),
        malloc="tcmalloc" if allocator.active() else "glibc",
        started=previous.started if previous else now(),
    )
    record.sessions = [*(previous.sessions if previous else []), record.session()]
    return record
