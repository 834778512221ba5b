"""One run across 2 ranks (gloo, CPU): the same losses as 1 process, rank 0 alone writes, a
preempted DDP run resumes exactly, and a checkpoint moves between world sizes."""

import os
import shlex
import shutil
import signal
import socket
import sys

import pytest
import torch
import torch.multiprocessing
from conftest import read_metrics, train_args, without_timing
from hang_guard import run_watched, tail

import repro.training.loop as loop_module
from repro.config import load_run
from repro.model import GPT
from repro.rundir import read_record
from repro.runtime import signals
from repro.training.run import train

EXPERIMENT = "resgelu-lr3e-3"
MICRO = 1  # sequence per micro-batch: 4 per step, 2 per rank, so no_sync's inner steps run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, data, indices, out, stop_at):
    """One rank, as torchrun would start it; rank 0 is signalled during step `stop_at`."""
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    torch.set_num_threads(1)  # as torchrun sets OMP_NUM_THREADS
    if stop_at is not None and rank == 0:
        real_step = loop_module.train_step

        def step_signalled(*args, **kwargs):
            if args[3] == stop_at:
                os.kill(os.getpid(), signal.SIGTERM)
            return real_step(*args, **kwargs)

        loop_module.train_step = step_signalled
    try:
        with signals.stop_signals():
            train(load_run("tiny", EXPERIMENT, train_micro_batch=MICRO), data, indices, out)
    except signals.Preempted:
        pass


def spawn(out, data, indices, stop_at=None, world=2):
    torch.multiprocessing.spawn(
        _rank, (world, free_port(), data, indices, out, stop_at), nprocs=world
    )


@pytest.fixture(scope="module")
def one_process(token_dir, tiny_indices, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    train(load_run("tiny", EXPERIMENT, train_micro_batch=MICRO), token_dir, tiny_indices, out)
    return read_metrics(out)


@pytest.fixture(scope="module")
def torchrun_two(token_dir, tiny_indices, tmp_path_factory):
    """The run on 2 ranks, started as the workflow starts it: torchrun ... -m repro train."""
    out = tmp_path_factory.mktemp("torchrun") / "run"
    result = run_watched(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "repro",
            *train_args(
                token_dir,
                tiny_indices,
                out,
                "--device",
                "cpu",
                "--train-micro-batch",
                MICRO,
                experiment=EXPERIMENT,
            ),
        ],
    )
    assert result.returncode == 0, tail(result.stdout + result.stderr)
    return out


def two_nodes_command(port: int, data, indices, out) -> list[str]:
    """Two torchrun "nodes" on this machine, each a process group of its own with one rank,
    meeting over loopback as nodes of a cluster meet at their first node's address (static
    rendezvous: node 0 hosts the store); both write into one folder, as a shared filesystem."""
    nodes = []
    for node_rank in (0, 1):
        node = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
        node += ["--nproc_per_node", "1", "--node_rank", str(node_rank)]
        node += ["--master_addr", "127.0.0.1", "--master_port", str(port), "-m", "repro"]
        node += train_args(data, indices, out, "--device", "cpu", "--train-micro-batch", MICRO,
                           experiment=EXPERIMENT)  # fmt: skip
        nodes.append("setsid " + shlex.join(node))
    script = f"{nodes[0]} & first=$!; {nodes[1]}; second=$?; wait $first; exit $(($? | second))"
    return ["bash", "-c", script]


def assert_close(rows, reference):
    """Losses within 1e-5 relative; stds within 1e-5 of their loss (a std of losses that differ
    by 1e-3 carries their float32 rounding, one unit of which is 1e-6 at a loss of 10)."""
    assert [r["step"] for r in rows] == [r["step"] for r in reference]
    for row, ref in zip(rows, reference):
        assert float(row["train_loss"]) == pytest.approx(float(ref["train_loss"]), rel=1e-5)
        for stream in ("eval_train", "eval_val"):
            loss, std = f"{stream}_loss", f"{stream}_std"
            if not ref[loss]:
                assert not row[loss]
                continue
            assert float(row[loss]) == pytest.approx(float(ref[loss]), rel=1e-5), row["step"]
            assert float(row[std]) == pytest.approx(float(ref[std]), abs=1e-5 * float(ref[loss]))


@pytest.mark.slow  # several processes
def test_two_ranks_give_the_one_process_losses(torchrun_two, one_process):
    rows = read_metrics(torchrun_two)
    assert len([r for r in rows if r["eval_val_loss"]]) == 4
    assert_close(rows, one_process)
    record = read_record(torchrun_two)
    assert record.status == "completed" and record.world_size == 2
    # Rank 0 alone wrote: one set of files, no temporary left.
    assert sorted(p.name for p in torchrun_two.iterdir()) == [
        ".lock",
        "ckpt.pt",
        "events.out.tfevents.repro",
        "metrics.csv",
        "run.json",
        "train.log",
    ]


@pytest.mark.slow  # several processes
def test_two_nodes_give_the_one_process_losses(one_process, token_dir, tiny_indices, tmp_path):
    """torchrun across nodes (--nnodes 2): the figures of one process, rank 0 alone writing."""
    out = tmp_path / "run"
    result = run_watched(two_nodes_command(free_port(), token_dir, tiny_indices, out))
    assert result.returncode == 0, tail(result.stdout + result.stderr)
    assert_close(read_metrics(out), one_process)
    record = read_record(out)
    assert record.status == "completed" and record.world_size == 2


@pytest.mark.slow  # several processes
def test_a_preempted_ddp_run_resumes_on_two_ranks_or_one(
    torchrun_two, one_process, token_dir, tiny_indices, tmp_path
):
    out = tmp_path / "run"
    spawn(out, token_dir, tiny_indices, stop_at=6)  # rank 0 signalled: both ranks stop at 7
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 7
    assert len(read_metrics(out)) == 7
    shutil.copytree(out, tmp_path / "on-one")

    spawn(out, token_dir, tiny_indices)
    assert without_timing(read_metrics(out)) == without_timing(read_metrics(torchrun_two))

    record = train(
        load_run("tiny", EXPERIMENT, train_micro_batch=MICRO),
        token_dir,
        tiny_indices,
        tmp_path / "on-one",
    )  # the world shrinks from 2 ranks to 1
    assert record.status == "completed" and record.world_size == 1
    rows = read_metrics(tmp_path / "on-one")
    assert without_timing(rows[:7]) == without_timing(read_metrics(torchrun_two)[:7])
    assert_close(rows, one_process)


def test_the_model_has_no_buffers_for_ddp_to_broadcast():
    assert not list(GPT(load_run("tiny", EXPERIMENT).model).buffers())
