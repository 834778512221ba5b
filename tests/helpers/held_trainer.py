"""`repro train`, as `python -m repro train` runs it, held at one moment of its training until a
stop signal arrives: where a test stops it.

    python held_trainer.py MOMENT train ARGS...

MOMENT is step:S (step S's gradients computed, before its update), evaluation:S:K (step S's
evaluation, before its micro-batch K, eval_train's then eval_val's), checkpoint:S:W (the checkpoint
holding step S, its W-th write flushed to the partial file) or none. There it prints `held at
MOMENT` and waits: SIGKILL ends it there; SIGINT and SIGTERM reach the package's handlers, and it
goes on as they make it.
"""

import sys
import time

moment = sys.argv.pop(1)
sys.argv[0] = "repro"
# first: the stop handlers, as `python -m repro` has them before anything slower is imported
from repro.entry import main  # noqa: E402

# isort: split

import torch  # noqa: E402

import repro.training.loop as loop  # noqa: E402
from repro.data.batches import Batches  # noqa: E402
from repro.runtime import signals  # noqa: E402

HOLD_S = 120  # the test signals as soon as it reads the line
now = {"step": None, "evaluation": 0}  # the step under way; the evaluation's micro-batches read


def hold(at: str) -> None:
    """Once: a checkpoint rewritten at the stop would pass the moment a second time."""
    global moment
    if at != moment:
        return
    print(f"held at {moment}", flush=True)
    moment = "passed"
    deadline = time.monotonic() + HOLD_S
    while not signals.requested():
        if time.monotonic() > deadline:
            sys.exit(f"held at {at}: no stop signal within {HOLD_S} s")
        time.sleep(0.01)


def schedule_held(self, step, schedule=loop.Schedule.__call__):
    now.update(step=step, evaluation=0)  # the loop asks the learning rate first of all
    return schedule(self, step)


def clip_held(*args, clip=torch.nn.utils.clip_grad_norm_, **kwargs):
    hold(f"step:{now['step']}")
    return clip(*args, **kwargs)


def get_held(self, stream, row, micro_step, get=Batches.get):
    if stream.startswith("eval_"):
        hold(f"evaluation:{now['step']}:{now['evaluation']}")
        now["evaluation"] += 1
    return get(self, stream, row, micro_step)


class HeldFile:
    """The checkpoint's file, held after its W-th write."""

    def __init__(self, file, step):
        self.file, self.step, self.writes = file, step, 0

    def write(self, data):
        written = self.file.write(data)
        self.writes += 1
        if moment == (at := f"checkpoint:{self.step}:{self.writes}"):
            self.file.flush()  # on disk, in the partial file, when the signal comes
            hold(at)
        return written

    def flush(self):
        self.file.flush()


def save_held(state, file, *args, save=torch.save, **kwargs):
    return save(state, HeldFile(file, state["step"]), *args, **kwargs)


loop.Schedule.__call__ = schedule_held
torch.nn.utils.clip_grad_norm_ = clip_held
Batches.get = get_held
torch.save = save_held  # what repro.training.checkpoints writes with
sys.exit(main())
