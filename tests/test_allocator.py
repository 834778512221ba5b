"""Importing repro.train keeps freed memory in the process (issue 10: CPU page faults)."""

import ctypes
import ctypes.util
import subprocess
import sys

import pytest
from workflow_helpers import REPO

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
def test_importing_train_serves_large_allocations_from_the_heap():
    assert mmapped_bytes("") >= 200 * 2**20  # glibc's default: a fresh mmap
    assert mmapped_bytes("import repro.train") == 0
