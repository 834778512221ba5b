"""The training of one run: schedule, optimiser, accumulation, evaluation, checkpoints, resume.

A run directory (repro.rundir) holds metrics.csv, run.json and ckpt.pt, the latest checkpoint.
Starting a run whose directory holds a checkpoint resumes from it; a finished run is never trained
or overwritten again, and a directory holding another configuration's run is refused. One process
at a time holds a run directory (repro.runtime.lock); a stop signal (SIGTERM,
repro.runtime.preemption) ends the run at a step boundary, with a checkpoint. A run that diverges
(repro.training.divergence) ends as `diverged`, with its metrics and its last checkpoint, and is
never
resumed.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import torch

from repro.config import RunConfig
from repro.data.batches import Batches, DeviceBatches
from repro.data.tokens import corpus_note
from repro.files import WriteError, make_dir
from repro.rundir import (
    CHECKPOINT,
    METRICS_CSV,
    MetricsLog,
    RunError,
    RunRecord,
    check_resume,
    identity_differences,
    read_record,
    rows_before,
)
from repro.rundir.history import legacy_identity
from repro.runtime import allocator, distributed, preemption
from repro.runtime.device import resolve_device
from repro.runtime.gpus import claim_device
from repro.runtime.lock import hold
from repro.runtime.progress import Progress
from repro.training.build import Built, build, with_train_micro_batch
from repro.training.checkpoints import check_checkpoint_space, load_checkpoint, restore
from repro.training.divergence import DivergenceStop
from repro.training.intervals import Checkpoints, StepLog
from repro.training.loop import eval_losses, learning_rate, train_step
from repro.training.provenance import now, run_record


def train(run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path) -> RunRecord:
    """Train one run into out_dir (resuming from its checkpoint if any); return its record.

    `run` is the resolved configuration (repro.config.resolve_run), runtime overrides included.
    A stop signal ends it with preemption.Preempted, once its checkpoint and run.json are written.
    """
    out_dir = make_dir(out_dir)
    # One writer per run: the first rank holds the run for all of a torchrun's ranks.
    with hold(out_dir, "run") if distributed.first_process() else nullcontext():
        previous = previous_record(out_dir, run)
        if previous is not None and previous.finished_training:
            return previous
        record = _train(run, data_dir, indices_dir, out_dir, previous)
    if not record.finished_training:
        raise preemption.Preempted(record.last_step + 1)
    return record


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
    """The device this process trains on, a GPU no other job on this node holds where the run
    names none, with torchrun's process group started."""
    device = resolve_device(run.runtime.device)
    if device.type == "cuda" and device.index is None:
        device = claim_device(wait=not distributed.launched())
    distributed.init(device)
    if device.type == "cpu" and distributed.is_main() and (line := allocator.notice()):
        print(line, flush=True)
    return device


def _train(
    run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path, previous: RunRecord | None
) -> RunRecord:
    """train(), in a run directory this process holds, of a run not finished; the record as it
    ended (completed, diverged, or still running: stopped by a signal)."""
    built = build(run, training_device(run))
    check_checkpoint_space(out_dir / CHECKPOINT, built.model)
    run = with_train_micro_batch(run, built)
    reader = f"experiment {run.experiment.name} at preset {run.preset_name}"
    batches = Batches.open(
        data_dir,
        indices_dir,
        reader,
        run.model.block_size,
        run.train,
        run.runtime.train_micro_batch,
    )
    if run.corpus == "openwebtext":
        print(corpus_note(batches.manifest), flush=True)
    start = resume(out_dir / CHECKPOINT, built, run)
    record = run_record(
        run, built.model, built.step_model, batches, data_dir, indices_dir, start, previous
    )
    main = distributed.is_main()  # the one process that writes the run's files
    # The logs first: one that cannot be written stops the run before run.json says "running".
    metrics = MetricsLog(out_dir / METRICS_CSV if main else None, start)
    try:
        if main:
            record.write(out_dir)
        log = StepLog(
            metrics,
            Progress(out_dir, start, run.train.max_step) if main else None,
            run.tokens_per_step,
            run.runtime.log_interval,
            run.train.eval_interval,
            start,
        )
        checkpoint_config = {"identity": record.identity, "model": record.identity["model"]}
        checkpoints = Checkpoints(
            out_dir / CHECKPOINT,
            built.model,
            built.optimizer,
            checkpoint_config,
            run.runtime.checkpoint_interval,
            run.train.max_step,
            main,
        )
        # Every rank replays the kept rows (one file on one node): all decide alike.
        divergence = DivergenceStop.of(run, rows_before(out_dir / METRICS_CSV, start))
        record = run_steps(run, built, batches, log, checkpoints, divergence, start, record)
    except WriteError as e:  # a full disk: what was checkpointed stays, and resumes
        raise WriteError(
            f"{e}: training stopped; its last checkpoint is kept, and the same command resumes "
            f"from it once there is room"
        ) from None
    finally:
        metrics.close()
    if record.finished_training:
        record.finished = now()
    if main:
        record.write(out_dir)
    return record


def resume(path: Path, built: Built, run: RunConfig) -> int:
    """Load the checkpoint at `path` if there is one; return the step to start from."""
    if not path.exists():
        return 0
    state = load_checkpoint(path, map_location=next(built.model.parameters()).device)
    identity = legacy_identity(state["config"]["identity"], run.train.eval_micro_batch)
    refuse_other_configuration(path, identity, run)
    check_resume(path.parent, state["step"], run.train.max_step)
    restore(path, state, built.model, built.optimizer)
    print(f"{path.parent}: resuming at step {state['step']}", flush=True)
    return state["step"]


def run_steps(
    run: RunConfig,
    built: Built,
    batches: Batches,
    log: StepLog,
    checkpoints: Checkpoints,
    divergence: DivergenceStop,
    start: int,
    record: RunRecord,
) -> RunRecord:
    """Steps start..max_step; the record as the run ended: completed, diverged, or (stopped by a
    signal, checkpointed) still running."""
    t, opt = run.train, run.optimizer
    model, step_model, optimizer, autocast = built
    device_batches = DeviceBatches(batches, next(model.parameters()).device)
    for step in range(start, t.max_step + 1):
        if distributed.any_rank(preemption.requested()):
            return stopped(step, log, divergence, checkpoints, record)
        lr = learning_rate(step, opt.lr_max, opt.lr_min, t.warmup_steps, t.decay_steps, t.schedule)
        for group in optimizer.param_groups:
            group["lr"] = lr
        evaluation = {}
        if step % t.eval_interval == 0:  # the model before this step's update, as the authors did
            eval_row = step // t.eval_interval  # the row of the evaluation indices
            evaluation = eval_losses(step_model, batches, eval_row, t.eval_batches, autocast)
        log.start_clock()
        loss = train_step(step_model, optimizer, device_batches, step, t.grad_clip, autocast)
        log.add(step, lr, evaluation, loss)
        # Write before a checkpoint too, so that metrics.csv holds every step it has taken.
        if log.due(step) or checkpoints.due(step):
            if (diverged := write_interval(log, divergence)) is not None:
                return diverged_record(record, *diverged)
            record.last_step = step
        if checkpoints.due(step):
            checkpoints.save(step + 1)
    return replace(record, status="completed")


def write_interval(log: StepLog, divergence: DivergenceStop) -> tuple[int, str] | None:
    """Write the pending steps' metrics up to the first that diverged, and train.log's line; return
    that step and why, else None."""
    rows = log.take()
    diverged = divergence.first(rows)
    log.write(rows, diverged)
    return diverged


def stopped(
    step: int,
    log: StepLog,
    divergence: DivergenceStop,
    checkpoints: Checkpoints,
    record: RunRecord,
) -> RunRecord:
    """On a stop signal before `step`: the steps taken written as at any interval; a run that
    diverged in them ends as diverged, any other is checkpointed at `step`, to resume there."""
    if log.pending and (diverged := write_interval(log, divergence)) is not None:
        return diverged_record(record, *diverged)
    checkpoints.save(step)
    return replace(record, last_step=step - 1)


def diverged_record(record: RunRecord, step: int, reason: str) -> RunRecord:
    """The record of a run that diverged at `step`: its last row, never resumed."""
    return replace(
        record, status="diverged", diverged_step=step, diverged_reason=reason, last_step=step
    )
