"""papermill's engine for the package's notebooks (`papermill --engine repro`, as the workflow
runs them): papermill's own, with a kernel whose log says only what went wrong.

- The kernel talks over IPC, not TCP (where ipykernel warns "without encryption" at every
  start), each kernel's sockets in a folder of its own: jupyter_client numbers them beside one
  shared prefix, so two notebooks started at once would read each other's messages.
- Shutdown after the last cell sends no SIGINT first: landing in the idle kernel, it logs
  "KeyboardInterrupt caught in kernel" for a run that succeeded.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

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


def __getattr__(name: str):
    """Engine, made on first use rather than at import: papermill loads its engines' entry points,
    this module's Engine among them, as papermill.engines is first imported, so an import of
    papermill at the top here would find this module half made where it is imported first."""
    if name != "Engine":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from papermill.engines import NBClientEngine  # may load the entry point, which makes Engine

    if "Engine" not in globals():

        class Engine(NBClientEngine):
            """papermill's nbclient engine with KernelManager."""

            @classmethod
            def execute_managed_notebook(cls, nb_man, kernel_name, **kwargs):
                return super().execute_managed_notebook(
                    nb_man, kernel_name, kernel_manager_class=KernelManager, **kwargs
                )

        Engine.__qualname__ = "Engine"
        globals()["Engine"] = Engine
    return globals()["Engine"]
