"""The training of one run: schedule, optimiser, accumulation, evaluation, checkpoints, resume.

A run directory (repro.rundir) holds metrics.csv, run.json and ckpt.pt, the latest checkpoint.
Starting a run whose directory holds a checkpoint resumes from it; a finished run is never trained
or overwritten again, and a directory holding another configuration's run is refused. One process
at a time holds a run directory (repro.runtime.lock); a stop signal (SIGTERM,
repro.runtime.preemption) ends the run at a step boundary, with a checkpoint. A run that diverges
(DivergenceStop) ends as `diverged`, with its metrics and its last checkpoint, and is never resumed.
"""

from __future__ import annotations

import math
import platform
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import torch

from repro.build import build
from repro.checkpoint import check_checkpoint_space, load_checkpoint, restore, save_checkpoint
from repro.config import RunConfig
from repro.data.batches import Batches, DeviceBatches
from repro.data.tokens import corpus_note
from repro.files import WriteError, make_dir
from repro.model import GPT, count_parameters
from repro.rundir import (
    CHECKPOINT,
    METRICS_CSV,
    MetricsLog,
    RunError,
    RunRecord,
    check_resume,
    code_version,
    identity_differences,
    legacy_identity,
    read_record,
    rows_before,
)
from repro.runtime import allocator, distributed, preemption
from repro.runtime.device import resolve_device
from repro.runtime.fit import auto_micro_batch
from repro.runtime.gpus import claim_device
from repro.runtime.lock import hold
from repro.runtime.progress import Progress
from repro.step import eval_losses, learning_rate, train_step


@dataclass
class DivergenceStop:
    """When a run has diverged (docs/runs.md, "When a run diverges").

    At any step: a non-finite train loss, or one above the loss ceiling (RunConfig.loss_ceiling).
    At an evaluation: a non-finite evaluation loss, or the `evaluations`-th consecutive validation
    loss more than `margin` nats above the best one before it (margin None: never).
    """

    ceiling: float
    margin: float | None
    evaluations: int
    best: float = math.inf  # the lowest validation loss so far
    above: int = 0  # consecutive evaluations more than `margin` above `best`

    @classmethod
    def of(cls, run: RunConfig, kept_rows: list[dict]) -> "DivergenceStop":
        """The stop of `run`, having seen the rows a resumed run keeps (rows_before's)."""
        stop = cls(run.loss_ceiling, run.train.divergence_margin, run.train.divergence_evaluations)
        for row in kept_rows:
            if row["eval_val_loss"] != "":
                stop.evaluated(float(row["eval_val_loss"]))
        return stop

    def reason(self, row: dict) -> str | None:
        """Why the run diverged at this metrics row, or None."""
        loss = row["train_loss"]
        if loss > self.ceiling:
            return f"train loss {loss:.4f}, above the ceiling {self.ceiling:.4f}"
        for key in ("train_loss", "eval_train_loss", "eval_val_loss"):
            if key in row and not math.isfinite(row[key]):
                return f"{key} {row[key]}, not a finite number"
        return self.evaluated(row["eval_val_loss"]) if "eval_val_loss" in row else None

    def evaluated(self, val_loss: float) -> str | None:
        """Take one evaluation's validation loss; why it ends the run, or None."""
        if self.margin is not None and val_loss > self.best + self.margin:
            self.above += 1
            if self.above >= self.evaluations:
                return (
                    f"validation loss {val_loss:.4f}, more than {self.margin:g} above the best "
                    f"{self.best:.4f} at {self.above} consecutive evaluations"
                )
            return None
        self.above = 0
        self.best = min(self.best, val_loss)
        return None


@dataclass
class Session:
    """What the steps of one training session use."""

    run: RunConfig
    model: GPT
    step_model: torch.nn.Module  # the model, or its compiled wrapper
    optimizer: torch.optim.Optimizer
    autocast: object
    batches: Batches
    metrics: MetricsLog
    out_dir: Path
    divergence: DivergenceStop


def now() -> str:
    return datetime.now(timezone.utc).isoformat()


def train(run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path) -> RunRecord:
    """Train one run into out_dir (resuming from its checkpoint if any); return its record.

    `run` is the resolved configuration (repro.config.resolve_run), runtime overrides included.
    """
    out_dir = make_dir(out_dir)
    # One writer per run: the first rank holds the run for all of a torchrun's ranks.
    with hold(out_dir, "run") if distributed.first_process() else nullcontext():
        return _train(run, data_dir, indices_dir, out_dir)


def _train(run: RunConfig, data_dir: Path, indices_dir: Path, out_dir: Path) -> RunRecord:
    """train(), in a run directory this process holds."""
    previous = read_record(out_dir) if (out_dir / "run.json").exists() else None
    if previous is not None:
        if previous.source != "repro":
            whose = "authors'" if previous.source == "authors" else f"{previous.source}'s"
            raise RunError(
                f"{out_dir / 'run.json'}: a run imported from the {whose} artefacts, never "
                f"trained over: use another --out"
            )
        _refuse_other_configuration(out_dir / "run.json", previous.identity, run)
        if previous.status == "diverged":
            print(
                f"{out_dir}: diverged at step {previous.diverged_step} "
                f"({previous.diverged_reason or 'loss not finite or above the ceiling'}); "
                f"not resumed: train it into another --out",
                flush=True,
            )
            return previous
        if previous.finished_training:
            print(f"{out_dir}: already {previous.status}; nothing to do", flush=True)
            return previous

    dev = resolve_device(run.runtime.device)
    if dev.type == "cuda" and dev.index is None:  # a GPU no other job on this node holds
        dev = claim_device(wait=not distributed.launched())
    distributed.init(dev)
    if dev.type == "cpu" and distributed.is_main() and (line := allocator.notice()):
        print(line, flush=True)
    model, step_model, optimizer, autocast = build(run, dev)
    check_checkpoint_space(out_dir / CHECKPOINT, model)
    if run.runtime.train_micro_batch == "auto" and dev.type == "cuda":
        # The model the steps call (its compiled graph's memory); under torchrun the bare one,
        # whose backward is no collective: each rank probes its own GPU.
        probed = model if distributed.launched() else step_model
        chosen = auto_micro_batch(
            probed, run.train.batch_size, run.model.block_size, autocast, distributed.size()
        )
        chosen = distributed.smallest(chosen)  # one micro-batch for every rank
        print(f"{out_dir}: training micro-batch {chosen} (auto)", flush=True)
        run = run.with_runtime(train_micro_batch=chosen)
    batches = Batches.open(
        data_dir,
        indices_dir,
        f"experiment {run.experiment.name} at preset {run.preset_name}",
        run.model.block_size,
        run.train,
        run.resolved_train_micro_batch,
    )
    if run.corpus == "openwebtext":
        print(corpus_note(batches.manifest), flush=True)
    start = _resume(out_dir / CHECKPOINT, model, optimizer, run, previous)
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
        device=torch.cuda.get_device_name(dev) if dev.type == "cuda" else str(dev),
        compile=hasattr(step_model, "_orig_mod"),  # torch.compile's wrapper
        world_size=distributed.size(),
        fused_projection=model.transformer.h[0].attn.fused,
        train_micro_batch=run.resolved_train_micro_batch,
        torch_threads=torch.get_num_threads(),
        malloc="tcmalloc" if allocator.active() else "glibc",
        started=previous.started if previous else now(),
    )
    record.sessions = [*(previous.sessions if previous else []), record.session()]
    main = distributed.is_main()  # the one process that writes the run's files
    # The logs first: one that cannot be written stops the run before run.json says "running".
    metrics = MetricsLog(out_dir / METRICS_CSV if main else None, start)
    try:
        if main:
            record.write(out_dir)
        session = Session(
            run,
            model,
            step_model,
            optimizer,
            autocast,
            batches,
            metrics,
            out_dir,
            # Every rank replays the kept rows (one file on one node): all decide alike.
            DivergenceStop.of(run, rows_before(out_dir / METRICS_CSV, start)),
        )
        record = run_steps(session, start, record)
    except WriteError as e:  # a full disk: what was checkpointed stays, and resumes
        raise WriteError(
            f"{e}: training stopped; its last checkpoint is kept, and the same command resumes "
            f"from it once there is room"
        ) from None
    finally:
        metrics.close()
    record.finished = now()
    if main:
        record.write(out_dir)
    return record


def _refuse_other_configuration(source: Path, identity: dict, run: RunConfig) -> None:
    differences = identity_differences(identity, run.identity())
    if differences:
        raise RunError(
            f"{source} holds a run of another configuration ({'; '.join(differences)}); "
            f"refusing to overwrite it: use another --out"
        )


def _resume(path: Path, model, optimizer, run: RunConfig, previous: RunRecord | None) -> int:
    """Load the checkpoint at `path` if there is one; return the step to start from."""
    if not path.exists():
        return 0
    state = load_checkpoint(path, map_location=next(model.parameters()).device)
    identity = legacy_identity(state["config"]["identity"], run.train.eval_micro_batch)
    _refuse_other_configuration(path, identity, run)
    check_resume(path.parent, state["step"], run.train.max_step)
    restore(path, state, model, optimizer)
    print(f"{path.parent}: resuming at step {state['step']}", flush=True)
    return state["step"]


def run_steps(s: Session, start: int, record: RunRecord) -> RunRecord:
    """Steps start..max_step: evaluate, step, log, checkpoint; the record as the run ended."""
    t, opt, runtime = s.run.train, s.run.optimizer, s.run.runtime
    checkpoint_config = {"identity": record.identity, "model": record.identity["model"]}
    device_batches = DeviceBatches(s.batches, next(s.model.parameters()).device)
    pending, began = [], time.perf_counter()  # (row, device loss) of the steps since a flush
    progress = Progress(s.out_dir, start, t.max_step) if distributed.is_main() else None
    for step in range(start, t.max_step + 1):
        if distributed.any_rank(preemption.requested()):
            return _stop(s, step, pending, began, record, checkpoint_config)
        lr = learning_rate(step, opt.lr_max, opt.lr_min, t.warmup_steps, t.decay_steps, t.schedule)
        for group in s.optimizer.param_groups:
            group["lr"] = lr
        row = {"step": step, "lr": lr}
        if step % t.eval_interval == 0:  # the model before this step's update, as the authors did
            row |= eval_losses(
                s.step_model, s.batches, step // t.eval_interval, t.eval_batches, s.autocast
            )
        if not pending:
            began = time.perf_counter()
        pending.append(
            (
                row,
                train_step(
                    s.step_model,
                    s.optimizer,
                    device_batches,
                    step,
                    s.run.accumulation,
                    t.grad_clip,
                    s.autocast,
                ),
            )
        )
        checkpoint = (step + 1) % runtime.checkpoint_interval == 0 or step == t.max_step
        # Flush before an evaluation (so that its time stays out of the step times), before a
        # checkpoint (so that metrics.csv holds every step the checkpoint has taken), and after
        # the session's first step (so that compilation and warm-up are its row's time alone).
        logged = (
            (step + 1) % runtime.log_interval == 0
            or (step + 1) % t.eval_interval == 0
            or step == start
        )
        if checkpoint or logged:
            diverged = _flush(pending, s, began, progress)
            if diverged is not None:
                return _diverged_record(record, *diverged)
            record.last_step, pending = step, []
        if checkpoint and distributed.is_main():
            save_checkpoint(
                s.out_dir / CHECKPOINT, s.model, s.optimizer, step + 1, checkpoint_config
            )
    return replace(record, status="completed")


def _stop(
    s: Session, step: int, pending, began: float, record: RunRecord, checkpoint_config: dict
) -> RunRecord:
    """On a stop signal: log the steps taken, checkpoint at `step`, raise Preempted."""
    if pending:
        diverged = _flush(pending, s, began)
        if diverged is not None:  # a diverged run ends as diverged, signal or not
            return _diverged_record(record, *diverged)
    if distributed.is_main():
        save_checkpoint(s.out_dir / CHECKPOINT, s.model, s.optimizer, step, checkpoint_config)
        replace(record, last_step=step - 1).write(s.out_dir)
    raise preemption.Preempted(step)


def _diverged_record(record: RunRecord, step: int, reason: str) -> RunRecord:
    """The record of a run that diverged at `step`: its last row, never resumed."""
    return replace(
        record, status="diverged", diverged_step=step, diverged_reason=reason, last_step=step
    )


def _flush(
    pending, s: Session, began: float, progress: Progress | None = None
) -> tuple[int, str] | None:
    """Write the pending steps' rows and their progress line, waiting for the device once.

    Returns the first diverged step (its row is the last one written) and why, else None. Step
    times are the interval's wall time shared equally: the device runs the steps back to back.
    """
    losses = torch.stack([loss for _, loss in pending]).tolist()  # the one synchronisation
    step_time = (time.perf_counter() - began) / len(pending)
    per_step = s.run.tokens_per_step
    written = []
    for (row, _), loss in zip(pending, losses):
        written.append(
            row
            | {
                "train_loss": loss,
                "tokens_seen": (row["step"] + 1) * per_step,
                "step_time_s": step_time,
                "tokens_per_s": per_step / step_time,
            }
        )
        s.metrics.append(written[-1])
        reason = s.divergence.reason(written[-1])
        if reason is not None:
            if progress is not None:
                progress.say(f"step {row['step']}: {reason} — diverged; ending the run")
            return row["step"], reason
    if progress is not None:  # the main process only: one log line per interval
        progress.report(written)
    return None
