"""The runtime of a command that uses the long-lived local service.

Its services are the shells of this configuration's pipeline host, a named
detached actor of the service, reached through the host (``host.call``).

Example::

    runtime = open_runtime(settings, Path.cwd())      # kind from settings.runtime.kind
    await runtime.start()                             # connects, starting the service
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.runtime import (
    Runtime,
    RuntimeKind,
    Service,
    _unwrap,
    create_runtime,
)
from ollm_cli.pipeline.service._socket import service_lost


class HostService(Service[Any]):
    """One shell of a pipeline host in the local service, called through the host."""

    def __init__(self, name: str, host: Any, max_inflight: int) -> None:
        super().__init__(name, max_inflight)
        self.host = host

    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from ray.exceptions import RayActorError, RayTaskError

        try:
            return await self.host.call.remote(self.name, method, args, kwargs)
        except RayTaskError as exc:
            raise _unwrap(exc) from None
        except RayActorError as exc:
            raise service_lost(exc) from None

    async def kill(self) -> None:
        raise OllmError(f"the {self.name} service lives in the OLLM service; stop that instead")

    async def memory_rss(self) -> int:
        return int(await self.host.memory_rss.remote())


class ServiceRuntime(Runtime):
    """The shells of this configuration's pipeline host in the local service.

    Starting connects to the service (starting it when needed) and gets or
    creates the host; shutting down only says goodbye: the shells, the loaded
    model and its caches stay for the next command.
    """

    kind: RuntimeKind = "service"
    depth_poll_s: float = 0.25  # a round trip to the service each time

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        super().__init__(settings, workspace)
        self.host: Any = None
        self._client_id = os.urandom(8).hex()

    async def start(self) -> None:
        import psutil

        from ollm_cli.pipeline.service._daemon import pipeline_host

        loop = asyncio.get_running_loop()
        self.host = await loop.run_in_executor(None, pipeline_host, self.settings, self.workspace)
        limit = self.settings.runtime.max_inflight
        rt = self.settings.runtime
        self.recording = HostService("recording", self.host, limit)
        self.context = HostService("context", self.host, limit)
        self.loop_detection = HostService("loop_detection", self.host, limit)
        self.sanitizer = HostService("sanitizer", self.host, limit)
        self.provider = HostService("provider", self.host, limit)
        self.compression = [
            HostService(f"compression-{i}", self.host, limit) for i in range(rt.compression_actors)
        ]
        self.tool_workers = [
            HostService(f"tool-worker-{i}", self.host, limit) for i in range(rt.tool_workers)
        ]
        started = psutil.Process(os.getpid()).create_time()
        await self.host.hello.remote(self._client_id, os.getpid(), started)

    async def inbox_depths(self) -> dict[str, int]:
        """The depths at the host's shells, where the conversations' calls are made."""
        from ray.exceptions import RayActorError

        try:
            depths: dict[str, int] = await self.host.inbox_depths.remote()
        except RayActorError as exc:
            raise service_lost(exc) from None
        return depths

    async def retire(self, timeout_s: float) -> None:
        """Stop this configuration's pipeline host once its sessions are closed (a load
        run's own pipeline, which no other command uses), instead of leaving it
        loaded until the service's idle timeout."""
        import ray

        if self.host is None:
            return
        with contextlib.suppress(Exception):
            await self.host.shutdown.remote(timeout_s)
        with contextlib.suppress(Exception):
            ray.kill(self.host, no_restart=True)

    async def shutdown(self) -> None:
        from ollm_cli.pipeline.service._daemon import disconnect

        if self.host is not None:
            with contextlib.suppress(Exception):
                await self.host.bye.remote(self._client_id)
            self.host = None
            await asyncio.get_running_loop().run_in_executor(None, disconnect)


def open_runtime(
    settings: OllmSettings,
    workspace: Path,
    *,
    kind: RuntimeKind | None = None,
    ray_address: str | None = None,
) -> Runtime:
    """The runtime named by ``kind`` (default: ``settings.runtime.kind``): the service's
    (``service``, the default: the local service, or the Ray cluster at
    ``runtime.rayAddress`` where the same detached pipeline hosts live), else
    ``runtime.create_runtime``'s."""
    chosen = kind or settings.runtime.kind
    if chosen == "service":
        if ray_address and ray_address != settings.runtime.ray_address:
            settings = settings.model_copy(
                update={"runtime": settings.runtime.model_copy(update={"ray_address": ray_address})}
            )
        return ServiceRuntime(settings, workspace)
    return create_runtime(settings, workspace, kind=chosen, ray_address=ray_address)
