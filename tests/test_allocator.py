"""malloc for CPU training (repro.runtime.allocator): freed memory kept within a step and trimmed
at its end, set where training starts, never by an import."""

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import write_token_files
from workflow_helpers import REPO

from repro.config import load_preset
from repro.data.indices import write_indices

PROBE = """
import ctypes
{setup}
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]

libc.mallinfo2.restype = MallInfo2
before = libc.mallinfo2().hblkhd  # bytes in mmap'd chunks: handed back to the kernel on free
buffer = libc.malloc(200 * 2**20)  # larger than a smoke run's logits
print(libc.mallinfo2().hblkhd - before)
"""


def mmapped_bytes(setup: str) -> int:
    env = {"PYTHONPATH": str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out)


glibc = pytest.mark.skipif(
    not hasattr(ctypes.CDLL(ctypes.util.find_library("c")), "mallinfo2"),
    reason="glibc >= 2.33 only",
)


@glibc
def test_importing_train_leaves_malloc_alone():
    assert mmapped_bytes("") >= 200 * 2**20  # glibc's default: a fresh mmap
    assert mmapped_bytes("import repro.train") >= 200 * 2**20


@glibc
def test_keeping_freed_memory_serves_large_allocations_from_the_heap():
    setup = "from repro.runtime.allocator import keep_freed_memory; assert keep_freed_memory()"
    assert mmapped_bytes(setup) == 0


TRAIN = """
import json, sys
from pathlib import Path
import repro.train
from repro.config import load_experiments, load_preset, resolve_run

def resident_mb():
    status = Path("/proc/self/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith("VmRSS:")).split()[1]) // 1024

at_start, train_step = [], repro.train.train_step
def measured(*args, **kwargs):
    at_start.append(resident_mb())
    return train_step(*args, **kwargs)
repro.train.train_step = measured
run = resolve_run(load_preset(sys.argv[1]), load_experiments()["baseline"], device="cpu")
repro.train.train(run, *map(Path, sys.argv[2:]))
print(json.dumps(at_start))
"""

# The smoke model (GPT-2's vocabulary: 51 MB of logits per micro-batch of 4 x 64 tokens), two
# micro-batches a step, one evaluation (step 0).
PRESET = {
    "description": "resident memory probe",
    "corpus": "python-docs",
    "model": {"n_layer": 2, "n_head": 2, "d_model": 32, "block_size": 64, "vocab_size": 50304},
    "train": {
        "max_step": 4,
        "batch_size": 8,
        "eval_micro_batch": 4,
        "warmup_steps": 1,
        "decay_steps": 4,
        "eval_interval": 5,
        "eval_sequences": 4,
        "eval_rows": 600,
    },
    "runtime": {"device": "cpu", "compile": False, "checkpoint_interval": 100},
    "report": {"table_step": 0},
    "resources": {"mem_mb": 2000, "runtime": 10},
}


@glibc
def test_resident_memory_does_not_grow_across_steps(tmp_path):
    """Each step's freed memory is handed back at its end: resident memory at the start of every
    step stays at the first step's (which follows the evaluation), not growing by the logits
    and gradients of the steps before."""
    data = write_token_files(tmp_path / "data")
    preset = tmp_path / "probe.yaml"
    preset.write_text(yaml.safe_dump(PRESET))
    write_indices(load_preset(str(preset)), data, tmp_path / "indices")
    path = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", TRAIN, str(preset), str(data), str(tmp_path / "indices")]
        + [str(tmp_path / "run")],
        env=os.environ | {"PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    at_start = json.loads(out.splitlines()[-1])
    assert len(at_start) == 5
    assert max(at_start[1:]) <= at_start[0] + 30, at_start  # MB
