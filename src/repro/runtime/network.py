"""Offline, found out at once: the Hugging Face hub asked once, not retried for a minute.

Offline, the hub's clients retry each request for about fifty seconds; one connection says whether
the hub can be reached, and where it cannot, HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set before
those clients are imported (they read them once). Behind a proxy nothing is asked.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlparse

from repro.errors import ReproError

HUB = "https://huggingface.co"
TIMEOUT_S = 3.0
OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable(timeout: float | None = None) -> bool:
    """Whether a TCP connection to the hub (HF_ENDPOINT where set) opens within `timeout`,
    the name's look-up included: a resolver that does not answer takes 20 s or more to give up
    and cannot be cut short, so the attempt runs in a daemon thread, left behind if it is late."""
    address = _hub_address()
    timeout = TIMEOUT_S if timeout is None else timeout
    opened = []
    attempt = threading.Thread(target=_connect, args=(address, timeout, opened), daemon=True)
    attempt.start()
    attempt.join(timeout)
    return bool(opened)


def _connect(address: tuple[str, int], timeout: float, opened: list) -> None:
    try:
        socket.create_connection(address, timeout=timeout).close()
    except OSError:
        return
    opened.append(True)


def _hub_address() -> tuple[str, int]:
    """The hub's host and port, from HF_ENDPOINT where set; a malformed one is a ReproError."""
    endpoint = os.environ.get("HF_ENDPOINT", HUB)
    try:
        url = urlparse(endpoint)
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as e:  # "Port out of range 0-65535", "Invalid IPv6 URL"
        raise ReproError(f"HF_ENDPOINT {endpoint}: not an address of the hub ({e})") from None
    if not url.hostname:
        raise ReproError(f"HF_ENDPOINT {endpoint}: not an address of the hub (no host)")
    return url.hostname, port


def offline_unless_reachable() -> None:
    """Set the hub's offline switches where it is unreachable; call before importing its clients."""
    if any(os.environ.get(v) for v in PROXIES) or os.environ.get("HF_HUB_OFFLINE") == "1":
        return
    if not hub_reachable():
        os.environ.update(dict.fromkeys(OFFLINE, "1"))
