"""Preemption and Ctrl-C: a stop signal checkpoints at the step boundary, `repro train` exits 75
(130 on Ctrl-C alone) in one line, and the next attempt resumes to the uninterrupted run's
metrics; so does one after SIGKILL, at whatever moment a stop comes (drawn at random)."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import REPO, read_metrics, train_args, without_timing
from hang_guard import watch
from preemption_helpers import checkpoint_differences, signal_during

from repro.cli.assembly import main
from repro.config import load_run
from repro.rundir import read_record
from repro.runtime import signals
from repro.training.checkpoints import load_checkpoint, read_checkpoint
from repro.training.run import train


def checkout_env() -> dict:
    """This process's environment, with the checkout's src/ first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PYTHONPATH": path}


def python_process(*argv: str) -> subprocess.Popen:
    """`python ARGV` on this checkout, its stdout and stderr read as text by the test."""
    return subprocess.Popen(
        [sys.executable, *argv],
        env=checkout_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def interrupted(args: list[str], after_step: int, signals) -> subprocess.CompletedProcess:
    """`repro train` as a process of its own, sent `signals` one after the other (as fast as
    they can be sent) once it has logged step `after_step`."""
    return signalled(["-m", "repro", *args], signals, f"step {after_step}/")


def signalled(argv: list[str], signals, once: str | None, delay: float = 0.0):
    """`python ARGV`, sent `signals` one after the other once it has printed a line starting with
    `once` (None: `delay` seconds after it started); the completed process, all it printed."""
    trainer = python_process(*argv)
    stdout = []
    if once is None:
        time.sleep(delay)
    else:
        for line in trainer.stdout:
            stdout.append(line)
            if line.startswith(once):
                break
    for signum in signals:
        trainer.send_signal(signum)
    with ThreadPoolExecutor(1) as pool:  # drains its pipes while the guard watches it
        said = pool.submit(trainer.communicate)
        watch(trainer, f"python {' '.join(argv)}, signalled {signals}")
        rest, stderr = said.result()
    return subprocess.CompletedProcess(
        trainer.args, trainer.returncode, "".join(stdout) + rest, stderr
    )


@pytest.mark.slow  # a `repro train` process, interrupted, then resumed
def test_ctrl_c_checkpoints_exits_130_and_the_next_attempt_resumes(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path
):
    args = train_args(token_dir, tiny_indices, tmp_path / "run")
    ended = interrupted(args, 2, [signal.SIGINT])
    assert ended.returncode == signals.INTERRUPT_EXIT == 130, ended.stderr
    assert "Traceback" not in ended.stderr and "KeyboardInterrupt" not in ended.stderr
    stopped = [line for line in ended.stderr.splitlines() if line.startswith("repro: ")]
    assert len(stopped) == 1 and stopped[0].startswith("repro: stopped by SIGINT signal at step ")
    step = torch.load(tmp_path / "run" / "ckpt.pt", weights_only=True)["step"]
    assert f"at step {step}, checkpointed" in stopped[0] and 3 <= step < 12
    assert len(read_metrics(tmp_path / "run")) == step

    assert main(args) == 0  # the next attempt resumes
    assert without_timing(read_metrics(tmp_path / "run")) == without_timing(
        read_metrics(tiny_baseline_run)
    )


@pytest.mark.slow  # a `repro train` process, interrupted, then resumed
def test_signals_in_quick_succession_stop_once_without_a_traceback(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path
):
    args = train_args(token_dir, tiny_indices, tmp_path / "run")
    ended = interrupted(args, 2, [signal.SIGTERM, signal.SIGTERM, signal.SIGINT])
    assert ended.returncode == signals.REQUEUE_EXIT, ended.stderr  # a scheduler's: requeue
    assert "Traceback" not in ended.stderr and "KeyboardInterrupt" not in ended.stderr
    assert ended.stderr.count("stopping at the next step boundary") == 1
    assert "repro: stopped by SIGINT, SIGTERM signal at step " in ended.stderr
    assert main(args) == 0
    assert without_timing(read_metrics(tmp_path / "run")) == without_timing(
        read_metrics(tiny_baseline_run)
    )


# Stops at moments drawn at random: each attempt is stopped once, at a moment of one kind
# (start-up, mid-step, an evaluation, a checkpoint write: each kind once, in a random order), and
# resumes where the one before left off. REPRO_TEST_STOP_SEED draws other moments.
STOP_SEED = os.environ.get("REPRO_TEST_STOP_SEED", "0")
HELD_TRAINER = REPO / "tests" / "helpers" / "held_trainer.py"
TINY = load_run("tiny", "baseline")
STOP_KINDS = ("start-up", "step", "evaluation", "checkpoint")
WRITES = range(1, 301)  # torch.save writes a tiny checkpoint in some 330 calls
EXIT = {signal.SIGINT: signals.INTERRUPT_EXIT, signal.SIGTERM: signals.REQUEUE_EXIT}


def next_moments(start: int, last: int, killed: bool) -> dict[str, list[str]]:
    """held_trainer's moments of each kind an attempt from step `start` passes, up to step `last`.
    A caught signal's attempt stops at the next step boundary, where the next attempt starts: the
    first two steps, the first evaluation's micro-batches and the first checkpoint's writes, so
    that each kind still comes in the attempts after it. A killed attempt's steps are trained
    again: every moment, but checkpoints that have one before them to keep (not the first)."""
    t, interval = TINY.train, TINY.runtime.checkpoint_interval
    steps = range(start, last + 1)
    evaluated = [s for s in steps if s % t.eval_interval == 0]
    checkpointed = [s + 1 for s in steps if (s + 1) % interval == 0 or s == t.max_step]
    if killed:
        checkpointed = [s for s in checkpointed if s > interval]
    first = slice(None) if killed else slice(1)
    return {
        "step": [f"step:{s}" for s in steps[: None if killed else 2]],
        "evaluation": [
            f"evaluation:{s}:{k}" for s in evaluated[first] for k in range(2 * t.eval_batches)
        ],
        "checkpoint": [f"checkpoint:{s}:{w}" for s in checkpointed[first] for w in WRITES],
    }


@pytest.mark.slow  # `repro train` processes, each stopped at a moment drawn at random
@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: signal.Signals(s).name
)
def test_stops_at_random_moments_resume_to_the_uninterrupted_run_bit_for_bit(
    signum, token_dir, tiny_indices, tiny_baseline_run, tmp_path
):
    """Whatever the moment, a stop leaves the last checkpoint whole (SIGKILL in a checkpoint's
    write: its partial file beside it), and the same command resumes from it to the uninterrupted
    run's metrics and checkpoint. A caught signal's moments come before the last step, at which
    the run would complete instead."""
    out = tmp_path / "run"
    args = train_args(token_dir, tiny_indices, out)
    name = signal.Signals(signum).name
    rng = random.Random(f"{STOP_SEED}:{name}")
    last = TINY.train.max_step - (signum != signal.SIGKILL)
    stops = []  # each attempt's moment and end: what a failure prints
    for kind in rng.sample(STOP_KINDS, len(STOP_KINDS)):
        start = read_checkpoint(out / "ckpt.pt")["step"] if (out / "ckpt.pt").exists() else 0
        if kind == "start-up":
            moment, delay, once = "none", round(rng.uniform(0.5, 2.5), 2), None
        else:
            moments = next_moments(start, last, signum == signal.SIGKILL)[kind]
            assert moments, f"no {kind} moment from step {start} to {last}: {stops}"
            moment, delay, once = rng.choice(moments), 0.0, "held at "
        ended = signalled([str(HELD_TRAINER), moment, *args], [signum], once, delay)
        stops.append(f"{kind} ({moment}, after {delay} s): exit {ended.returncode}")
        said = f"REPRO_TEST_STOP_SEED={STOP_SEED}, {name}: {'; '.join(stops)}\n{ended.stderr}"
        assert ended.returncode == EXIT.get(signum, -signum), said
        assert "Traceback" not in ended.stderr, said
        if signum != signal.SIGKILL:
            lines = ended.stderr.splitlines()
            assert [line.startswith("repro: ") for line in lines].count(True) == 1, said
        if (out / "ckpt.pt").exists():
            load_checkpoint(out / "ckpt.pt")  # whole, whenever the stop came
        if kind == "checkpoint" and signum == signal.SIGKILL:
            assert list(out.glob(".ckpt.pt.*.partial")), said  # killed within the write

    assert main(args) == 0, said
    assert read_record(out).status == "completed" and not list(out.glob("*.partial")), said
    resumed, whole = read_metrics(out), read_metrics(tiny_baseline_run)
    assert without_timing(resumed) == without_timing(whole), said
    assert not checkpoint_differences(out / "ckpt.pt", tiny_baseline_run / "ckpt.pt"), said


@pytest.mark.slow  # a `repro train` process, stopped
def test_sigterm_mid_step_checkpoints_whatever_stop_signal_names(token_dir, tiny_indices, tmp_path):
    """--stop-signal SIGUSR2 (a scheduler's early warning): the SIGTERM at its time limit that
    arrives mid-step still stops at the step boundary with a checkpoint."""
    out = tmp_path / "run"
    args = [*train_args(token_dir, tiny_indices, out), "--stop-signal", "SIGUSR2"]
    ended = interrupted(args, 2, [signal.SIGTERM])
    assert ended.returncode == signals.REQUEUE_EXIT, ended.stderr
    assert "outside the training steps" not in ended.stderr
    assert "repro: stopped by SIGTERM signal at step " in ended.stderr
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] >= 3


def test_a_stop_signal_checkpoints_and_the_next_attempt_resumes(
    token_dir, tiny_indices, tiny_baseline_run, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "split"
    args = [*train_args(token_dir, tiny_indices, out), "--stop-signal", "USR1"]
    signal_during(monkeypatch, 7, signal.SIGUSR1)
    assert main(args) == signals.REQUEUE_EXIT == 75
    assert "stopped by SIGUSR1 signal at step 8, checkpointed" in capsys.readouterr().err
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 8  # not the step-5 one
    assert len(read_metrics(out)) == 8
    record = read_record(out)
    assert record.status == "running" and record.last_step == 7

    monkeypatch.undo()  # the next attempt: no signal
    assert main(args) == 0
    assert read_record(out).status == "completed"
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(tiny_baseline_run))


def test_sigterm_is_a_stop_signal_by_default(token_dir, tiny_indices, tmp_path, monkeypatch):
    signal_during(monkeypatch, 2, signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(signals.Preempted, match="SIGTERM signal at step 3"):
        with signals.stop_signals():
            train(load_run("tiny", "baseline"), token_dir, tiny_indices, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["last_step"] == 2
    assert signal.getsignal(signal.SIGTERM) is before  # the process's own handler is back


def test_an_unknown_stop_signal_is_named(capsys):
    assert main(train_args("d", "i", "o", "--stop-signal", "SIGNOPE")) == 2
    assert "--stop-signal: no signal named 'SIGNOPE'" in capsys.readouterr().err


@pytest.mark.slow  # `repro train` processes, signalled while they start
@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 75), (signal.SIGINT, 130)])
def test_a_signal_while_the_trainer_starts_is_one_line_and_its_exit_status(
    token_dir, tiny_indices, tmp_path, signum, status
):
    """Before training's own handlers are in place (imports, the allocator's restart, loading
    data): SIGTERM asks for a requeue (75), Ctrl-C is the user's stop (130); never a traceback."""
    trainer = python_process("-m", "repro", *train_args(token_dir, tiny_indices, tmp_path / "run"))
    assert trainer.stdout.readline().startswith("config: ")  # past the imports, not training
    trainer.send_signal(signum)
    _, stderr = trainer.communicate(timeout=600)
    assert trainer.returncode == status, stderr
    assert stderr.splitlines() == [
        f"repro: stopped by {signal.Signals(signum).name} outside the training steps; run again"
    ], stderr


# `repro train` as its entry point starts it, with the command line's import held until the test
# has sent its signal: the imports of torch and the package, the longest part of a start.
DURING_THE_IMPORTS = """
import importlib.abc, sys, time
class HeldImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "repro.cli":
            print("importing", flush=True)
            time.sleep(600)  # the signal ends the process here
        return None
sys.meta_path.insert(0, HeldImport())
sys.argv = ["repro", "train", "--preset", "tiny"]
from repro.entry import main
sys.exit(main())
"""


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 75), (signal.SIGINT, 130)])
def test_a_signal_while_the_command_line_is_imported_is_one_line(signum, status):
    """The first lines of `repro train` (repro.entry) answer a stop signal before the slow imports:
    not a KeyboardInterrupt traceback, not a bare 143."""
    trainer = python_process("-c", DURING_THE_IMPORTS)
    assert trainer.stdout.readline() == "importing\n"
    trainer.send_signal(signum)
    _, stderr = trainer.communicate()
    assert trainer.returncode == status, stderr
    name = signal.Signals(signum).name
    assert stderr.splitlines() == [
        f"repro: stopped by {name} outside the training steps; run again"
    ]


# The same with the import of the signal handlers' own module slowed: a Ctrl-C in the first
# hundredths of a second, before repro.entry has imported anything of the package, is held
# until the handlers are in place.
DURING_THE_FIRST_IMPORT = DURING_THE_IMPORTS.replace(
    '"repro.cli"', '"repro.runtime.signals"'
).replace("time.sleep(600)  # the signal ends the process here", "time.sleep(3)")


@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 75), (signal.SIGINT, 130)])
def test_a_signal_while_the_handlers_module_is_imported_is_one_line(signum, status):
    trainer = python_process("-c", DURING_THE_FIRST_IMPORT)
    assert trainer.stdout.readline() == "importing\n"
    trainer.send_signal(signum)
    _, stderr = trainer.communicate()
    assert trainer.returncode == status, stderr
    name = signal.Signals(signum).name
    assert stderr.splitlines() == [
        f"repro: stopped by {name} outside the training steps; run again"
    ]


RESTARTED_UNDER_A_SIGNAL = """
import ctypes.util, os, signal, sys
if not os.environ.get("REPRO_MALLOC"):  # before the restart: a signal sent as it execs
    ctypes.util.find_library = lambda name: "libc.so.6"  # an allocator to restart under
    execve = os.execve
    def signalled_execve(*args):
        os.kill(os.getpid(), signal.{name})
        execve(*args)
    os.execve = signalled_execve
else:
    print("restarted", flush=True)  # the signal, held across the exec, is yet to come
from repro.cli.assembly import main
sys.exit(main())
"""


@pytest.mark.slow  # `repro train` processes, restarted by the allocator
@pytest.mark.parametrize("signum,status", [(signal.SIGTERM, 75), (signal.SIGINT, 130)])
def test_a_signal_during_the_allocators_restart_is_one_line_and_its_exit_status(
    token_dir, tiny_indices, tmp_path, signum, status
):
    """The restart (repro.runtime.allocator.restart_under_allocator) replaces the process,
    handlers and all: a signal then waits, blocked, for the new process's handlers."""
    env = {k: v for k, v in checkout_env().items() if k not in ("REPRO_MALLOC", "LD_PRELOAD")}
    code = RESTARTED_UNDER_A_SIGNAL.format(name=signal.Signals(signum).name)
    args = train_args(token_dir, tiny_indices, tmp_path / "run")
    ended = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert ended.returncode == status, ended.stderr
    assert ended.stdout.splitlines() == ["restarted"]  # the new process handled it
    name = signal.Signals(signum).name
    assert ended.stderr.splitlines() == [
        f"repro: stopped by {name} outside the training steps; run again"
    ], ended.stderr
    assert not (tmp_path / "run").exists()  # stopped before anything was written


def test_the_signals_held_at_the_start_are_those_handled_until_training_starts():
    """repro.entry holds EARLY while it imports the handlers: all that they handle by default."""
    from repro import entry

    assert entry.EARLY == {signals.signal_number(name) for name in signals.STOP_SIGNALS} | {
        signals.signal_number(name) for name in signals.ALWAYS
    }


def test_ctrl_c_while_a_command_starts_is_one_line(monkeypatch, capsys):
    """Ctrl-C before the command runs (while the command line is imported and parsed), as at
    the start of `repro import-audit-log`: one line and 130, not a traceback."""
    from repro import entry
    from repro.cli import assembly

    def interrupted(command=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(assembly, "build_parser", interrupted)
    monkeypatch.setattr(sys, "argv", ["repro", "import-audit-log", "x.csv", "--out", "run"])
    assert entry.main() == signals.INTERRUPT_EXIT
    assert capsys.readouterr().err == "repro: interrupted\n"
