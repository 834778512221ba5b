"""The run around the loop: open its directory, build what it trains with, resume it, record it.

A finished or diverged run is never trained or overwritten again, and a directory holding another
configuration's run is refused (docs/runs.md).
"""

from __future__ import annotations

import os
import platform
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from repro.config import RunConfig
from repro.data.batches import Batches
from repro.data.tokens import corpus_note
from repro.files import WriteError, make_dir
from repro.model import count_parameters
from repro.rundir import (
    CHECKPOINT,
    RUN_JSON,
    RunError,
    RunRecord,
    check_resume,
    code_version,
    identity_differences,
    read_record,
)
from repro.rundir.history import legacy_identity, with_later_defaults
from repro.runtime import allocator, distributed, machine, signals
from repro.runtime.determinism import make_deterministic
from repro.runtime.device import resolve_device
from repro.runtime.lock import LOCK_FILE, hold
from repro.training.checkpoints import Checkpoints, check_checkpoint_space, load_checkpoint, restore
from repro.training.logs import StepLog
from repro.training.loop import Built, build, run_steps, with_train_micro_batch


def train(run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path) -> RunRecord:
    """Train one run into out_dir (resuming if it can); a stop signal raises Preempted."""
    made = missing_folders(Path(out_dir))
    out_dir = make_dir(out_dir)
    # One writer per run: the first rank holds the run for all of a torchrun's ranks.
    first = distributed.first_process()
    new_lock = first and not os.path.lexists(out_dir / LOCK_FILE)
    with hold(out_dir, "run") if first else nullcontext():
        try:
            previous = previous_record(out_dir, run)
            if previous is not None and previous.finished_training:
                return previous
            record = _train(run, data_dir, indices_dir, out_dir, previous)
        except BaseException:
            if new_lock and not (out_dir / RUN_JSON).exists():
                leave_nothing(out_dir / LOCK_FILE, made)
            raise
    if not record.finished_training:
        raise signals.Preempted(record.last_step + 1)
    return record


def missing_folders(path: Path) -> list[Path]:
    """The folders make_dir(path) would create, deepest first."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def leave_nothing(lock: Path, made: list[Path]) -> None:
    """After a refusal before the run was recorded: the lock file this process created and the
    folders it made, where empty, removed (while the lock is held: no other trainer holds
    the file unlinked). Else `repro status` would list a run that never started; a folder that
    was there before, or holds anything else, stays."""
    lock.unlink(missing_ok=True)
    for folder in made:
        try:
            folder.rmdir()
        except OSError:  # not empty: something else was written there meanwhile
            return


def previous_record(out_dir: Path, run: RunConfig) -> RunRecord | None:
    """The record of the run out_dir holds, if any; one `run` may not train over is refused."""
    if not (out_dir / "run.json").exists():
        return None
    previous = read_record(out_dir)
    if previous.source != "repro":
        whose = "authors'" if previous.source == "authors" else f"{previous.source}'s"
        raise RunError(
            f"{out_dir / 'run.json'}: a run imported from the {whose} artefacts, never "
            f"trained over: use another --out"
        )
    refuse_other_configuration(out_dir / "run.json", previous.identity, run)
    if previous.status == "diverged":
        print(
            f"{out_dir}: diverged at step {previous.diverged_step} "
            f"({previous.diverged_reason or 'loss not finite or above the ceiling'}); "
            f"not resumed: train it into another --out",
            flush=True,
        )
    elif previous.finished_training:
        print(f"{out_dir}: already {previous.status}; nothing to do", flush=True)
    return previous


def refuse_other_configuration(source: Path, identity: dict, run: RunConfig) -> None:
    differences = identity_differences(identity, run.identity())
    if differences:
        raise RunError(
            f"{source} holds a run of another configuration ({'; '.join(differences)}); "
            f"refusing to overwrite it: use another --out"
        )


def training_device(run: RunConfig) -> torch.device:
    """The device this process trains on, with torchrun's process group started, and with
    runtime.deterministic its kernels made deterministic first (before CUDA starts)."""
    if run.runtime.deterministic:
        make_deterministic()
    device = resolve_device(run.runtime.device)
    if device.type == "cuda" and device.index is None:
        from repro.runtime.gpus import claim_device  # CUDA without a GPU named: one to claim

        device = claim_device(wait=not distributed.launched())
    distributed.init(device)
    if device.type == "cpu" and distributed.is_main() and (line := allocator.notice()):
        print(line, flush=True)
    return device


def _train(
    run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path, previous: RunRecord | None
) -> RunRecord:
    """train(), in a run directory this process holds, of a run not finished."""
    # The token files and indices first: a wrong folder is refused before the model is built
    # (on a GPU: before CUDA starts and the micro-batch probe compiles).
    batches = Batches.open(data_dir, indices_dir, run)
    built = build(run, training_device(run))
    check_checkpoint_space(out_dir / CHECKPOINT, built.model)
    run = with_train_micro_batch(run, built)
    batches = replace(batches, train_micro_batch=run.runtime.train_micro_batch)
    if run.corpus == "openwebtext":
        print(corpus_note(batches.manifest), flush=True)
    start, kept = resume(out_dir / CHECKPOINT, built, run)
    record = run_record(run, built, batches, data_dir, indices_dir, start, previous)
    main = distributed.is_main()  # the one process that writes the run's files
    # The logs first: one that cannot be written stops the run before run.json says "running".
    log = StepLog.open(run, out_dir, kept, writer=main)
    record.trackers = log.metrics.trackers_on
    try:
        if main:
            record.write(out_dir)
        checkpoints = Checkpoints.of(run, out_dir, record.identity, built, writer=main)
        record = run_steps(run, built, batches, log, checkpoints, record)
    except WriteError as e:  # a full disk: what was checkpointed stays, and resumes
        raise WriteError(
            f"{e}: training stopped; its last checkpoint is kept, and the same command resumes "
            f"from it once there is room"
        ) from None
    finally:
        log.metrics.close()
    record.trackers = log.metrics.trackers_on
    if record.finished_training:
        record.finished = now()
    if main:
        record.write(out_dir)
    return record


def resume(path: Path, built: Built, run: RunConfig) -> tuple[int, list[dict]]:
    """The step to start from (a checkpoint's, loaded) and the metrics.csv rows kept before it."""
    if not path.exists():
        return 0, []
    state = load_checkpoint(path, map_location=next(built.model.parameters()).device)
    recorded = legacy_identity(state["config"]["identity"], run.train.eval_micro_batch)
    identity = with_later_defaults(recorded)
    refuse_other_configuration(path, identity, run)
    kept = check_resume(path.parent, state["step"], run.train.max_step)
    restore(path, state, built.model, built.optimizer)
    print(f"{path.parent}: resuming at step {state['step']}", flush=True)
    return state["step"], kept


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def run_record(
    run: RunConfig,
    built: Built,
    batches: Batches,
    data_dir: Path,
    indices_dir: Path,
    start: int,
    previous: RunRecord | None,
) -> RunRecord:
    """run.json of a run starting (or resuming) at step `start`; `previous` the record so far."""
    model, step_model, m = built.model, built.step_model, run.model
    device = next(model.parameters()).device
    compiled = hasattr(step_model, "_orig_mod")  # torch.compile's wrapper
    kernel = built.autocast.attention_kernel(m.n_head, m.block_size, m.head_size, device)
    cuda = device.type == "cuda"
    about = machine.machine()
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
        device=torch.cuda.get_device_name(device) if cuda else str(device),
        **{key: about[key] for key in ("cpu", "cpu_capability", "math_libraries")},
        cuda_version=torch.version.cuda if cuda else None,
        cudnn_version=torch.backends.cudnn.version() if cuda else None,
        compile=compiled,
        compile_mode=run.runtime.compile_mode if compiled else None,
        deterministic=torch.are_deterministic_algorithms_enabled(),
        attention_kernel=kernel,
        world_size=distributed.size(),
        fused_projection=model.transformer.h[0].attn.fused,
        fused_loss=model.fused_loss,
        train_micro_batch=run.runtime.train_micro_batch,
        torch_threads=torch.get_num_threads(),
        malloc=allocator.in_use(),
        started=previous.started if previous else now(),
    )
    record.sessions = [*(previous.sessions if previous else []), record.session()]
    return record
