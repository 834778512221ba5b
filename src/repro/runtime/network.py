"""Offline, found out at once: the Hugging Face hub asked once, not retried for a minute.

Offline, the hub's clients retry each request for about fifty seconds; one connection says whether
the hub can be reached, and where it cannot, HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set before
those clients are imported (they read them once). Behind a proxy nothing is asked.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

HUB = "https://huggingface.co"
TIMEOUT_S = 3.0
OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
PROXIES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_reachable(timeout: float = TIMEOUT_S) -> bool:
    """Whether a TCP connection to the hub (HF_ENDPOINT where set) opens within `timeout`."""
    url = urlparse(os.environ.get("HF_ENDPOINT", HUB))
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def offline_unless_reachable() -> None:
    """Set the hub's offline switches where it is unreachable; call before importing its clients."""
    if any(os.environ.get(v) for v in PROXIES) or os.environ.get("HF_HUB_OFFLINE") == "1":
        return
    if not hub_reachable():
        os.environ.update(dict.fromkeys(OFFLINE, "1"))
