"""Processes the tests start and wait on: whether one is still running, and a wait for a
condition that ends in an error naming what was awaited."""

import time
from pathlib import Path


def alive(pid: int) -> bool:
    """pid is running: a zombie (an exited child or orphan not yet reaped) counts as gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for(condition, seconds: float, what: str = "the condition"):
    """condition()'s first true value, asked every 0.2 s; TimeoutError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"{what}: not within {seconds} s")
