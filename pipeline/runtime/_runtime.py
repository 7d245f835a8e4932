"""The set of service actors the coordinator talks to, whatever runs them.

Example::

    runtime = create_runtime(settings, Path.cwd(), kind="inprocess")
    await runtime.start()
    depths = await runtime.inbox_depths()
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.context import ContextShell
from ollm_cli.actors.loop_detection import LoopDetectionShell
from ollm_cli.actors.provider import ProviderShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.sanitizer import SanitizerShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.actors.tool_worker import ToolWorkerShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.runtime._service import Service

logger = logging.getLogger(__name__)

RuntimeKind = Literal["service", "ray", "inprocess"]


class Runtime(ABC):
    """The set of service actors the coordinator talks to."""

    kind: RuntimeKind
    depth_poll_s: float = 0.02
    """How often the load harness asks for :meth:`inbox_depths`."""

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        self.settings = settings
        self.workspace = workspace
        self.recording: Service[RecordingShell]
        self.context: Service[ContextShell]
        self.loop_detection: Service[LoopDetectionShell]
        self.sanitizer: Service[SanitizerShell]
        self.compression: list[Service[CompressionShell]] = []
        self.provider: Service[ProviderShell]
        self.tool_workers: list[Service[ToolWorkerShell]] = []

    @property
    def services(self) -> list[Service[Any]]:
        """Every service, for inbox-depth and memory reports."""
        return [
            self.recording,
            self.context,
            self.loop_detection,
            self.sanitizer,
            self.provider,
            *self.compression,
            *self.tool_workers,
        ]

    async def inbox_depths(self) -> dict[str, int]:
        """Calls in flight or waiting at each service (the load harness's inbox depths)."""
        return {s.name: s.inflight + s.waiting for s in self.services}

    def tool_worker(self) -> Service[ToolWorkerShell]:
        """The least busy tool worker."""
        return min(self.tool_workers, key=lambda s: s.inflight + s.waiting)

    def compressor(self) -> Service[CompressionShell]:
        """The least busy compression actor."""
        return min(self.compression, key=lambda s: s.inflight + s.waiting)

    @abstractmethod
    async def start(self) -> None:
        """Create the actors."""

    @abstractmethod
    async def shutdown(self) -> None:
        """Close the services (saving every open session) and stop the actors."""

    async def _close_services(self) -> None:
        # after a failed start some services may not exist: close those that do
        started = [getattr(self, name, None) for name in ("recording", "provider")]
        for service in [s for s in (*started, *self.compression) if s is not None]:
            try:
                await service.call(ShellBase.close)
            except Exception as exc:  # closing is best effort; the store recovers on open
                logger.warning("closing the %s service failed: %s", service.name, exc)


def shells_of(settings: OllmSettings, workspace: Path) -> dict[str, tuple[type, tuple[Any, ...]]]:
    return {
        "recording": (RecordingShell, (settings,)),
        "context": (ContextShell, (settings, workspace)),
        "loop_detection": (LoopDetectionShell, (settings,)),
        "sanitizer": (SanitizerShell, (settings,)),
        "provider": (ProviderShell, (settings,)),
    }


__all__ = ["Runtime", "RuntimeKind", "shells_of"]
