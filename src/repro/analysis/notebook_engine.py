"""papermill's engine for the package's notebooks (`papermill --engine repro`, as the workflow
runs them): papermill's own, with a kernel whose log says only what went wrong.

- The kernel talks over IPC (Unix sockets, readable by this user only), not TCP: over TCP
  without CurveZMQ keys ipykernel logs "WARNING ... without encryption" at every start, which
  is true there (anyone on the machine could connect) and not here. Each kernel's sockets lie in
  a folder of its own: jupyter_client names IPC sockets after the first free number beside a
  shared prefix (`kernel-ipc-N` in the working directory), so two notebooks started at once
  (the workflow's jobs run in parallel, in notebooks/) would bind the same sockets and read
  each other's messages ("Invalid Signature").
- Shutting down a kernel after the notebook's last cell sends no SIGINT first: jupyter_client
  interrupts a kernel before asking it to shut down, and where the interrupt lands in the idle
  kernel's event loop the kernel logs "ERROR ... KeyboardInterrupt caught in kernel" for a run
  that succeeded. An interrupt while a cell runs (a timeout) is sent as before.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from papermill.engines import NBClientEngine

ENGINE = "repro"  # the name pyproject.toml's papermill.engine entry point gives this engine


class KernelManager(AsyncKernelManager):
    """A kernel over IPC that is not interrupted on its way out."""

    def __init__(self, **kwargs):
        self.sockets_dir = Path(tempfile.mkdtemp(prefix="repro-kernel-"))
        super().__init__(**{"transport": "ipc", "ip": str(self.sockets_dir / "ipc"), **kwargs})

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self.sockets_dir, ignore_errors=True)

    async def _async_interrupt_kernel(self) -> None:
        if not self.shutting_down:
            await super()._async_interrupt_kernel()


class Engine(NBClientEngine):
    """papermill's nbclient engine with KernelManager."""

    @classmethod
    def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
        return super().execute_managed_notebook(
            nb_man, kernel_name, kernel_manager_class=KernelManager, **kwargs
        )
