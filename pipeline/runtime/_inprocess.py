"""The in-process runtime: every shell a plain object in this process, its blocking
methods run on a thread pool (fast tests, tiny runs, and each pipeline host of
the local service).

Example::

    runtime = InProcessRuntime(settings, Path.cwd())
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.tool_worker import ToolWorkerShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.runtime._runtime import Runtime, RuntimeKind, shells_of
from ollm_cli.pipeline.runtime._service import Service, ShellT


class LocalService(Service[ShellT]):
    """A shell object in this process; blocking methods run on the runtime's pool."""

    def __init__(self, name: str, obj: ShellT, pool: ThreadPoolExecutor, max_inflight: int) -> None:
        super().__init__(name, max_inflight)
        self.obj = obj
        self._pool = pool

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        function = getattr(self.obj, method)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: function(*args, **kwargs))

    async def kill(self) -> None:
        raise OllmError(f"the in-process {self.name} service cannot be killed")

    async def memory_rss(self) -> int:
        import psutil

        return int(psutil.Process(os.getpid()).memory_info().rss)


class InProcessRuntime(Runtime):
    """Every shell as a plain object in this process."""

    kind: RuntimeKind = "inprocess"

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        super().__init__(settings, workspace)
        self._pool = ThreadPoolExecutor(
            max_workers=max(64, settings.runtime.max_inflight), thread_name_prefix="ollm"
        )

    async def start(self) -> None:
        limit = self.settings.runtime.max_inflight
        made = {
            name: LocalService(name, cls(*args), self._pool, limit)
            for name, (cls, args) in shells_of(self.settings, self.workspace).items()
        }
        self.recording = made["recording"]
        self.context = made["context"]
        self.loop_detection = made["loop_detection"]
        self.sanitizer = made["sanitizer"]
        self.provider = made["provider"]
        self.compression = [
            LocalService(f"compression-{i}", CompressionShell(self.settings), self._pool, limit)
            for i in range(self.settings.runtime.compression_actors)
        ]
        self.tool_workers = [
            LocalService(
                f"tool-worker-{i}",
                ToolWorkerShell(self.settings, self.workspace),
                self._pool,
                limit,
            )
            for i in range(self.settings.runtime.tool_workers)
        ]

    async def shutdown(self) -> None:
        await self._close_services()
        self._pool.shutdown(wait=False, cancel_futures=True)


__all__ = ["InProcessRuntime", "LocalService"]
