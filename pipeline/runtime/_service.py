"""A handle to one service actor: called by the shell's own method (mypy checks
the call), with bounded in-flight calls (the inbox depths the load harness reports).

Example::

    session = await runtime.recording.call(RecordingShell.get_session, sid)
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from ollm_cli.actors.shell import ShellBase
from ollm_cli.pipeline.telemetry import trace_carrier

ShellT = TypeVar("ShellT", bound=ShellBase)
P = ParamSpec("P")
R = TypeVar("R")


class Service(ABC, Generic[ShellT]):
    """A handle to one service actor, with bounded in-flight calls.

    ``await service.call(RecordingShell.get_session, sid)``: the method is
    the shell's own, so its arguments and result are checked; it runs on the
    actor under its name (an override in the actor's class is the one run).
    """

    def __init__(self, name: str, max_inflight: int) -> None:
        self.name = name
        self.max_inflight = max_inflight
        self.inflight = 0
        self.waiting = 0
        self.calls = 0
        self._semaphore: asyncio.Semaphore | None = None

    def _sem(self) -> asyncio.Semaphore:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_inflight)
        return self._semaphore

    async def call(
        self,
        method: Callable[Concatenate[ShellT, P], R],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """Call ``method`` on the actor and wait for its result."""
        result: R = await self._enter(method.__name__, args, kwargs)
        return result

    async def _enter(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.waiting += 1
        async with self._sem():
            self.waiting -= 1
            self.inflight += 1
            self.calls += 1
            if (carrier := trace_carrier()) is not None:  # the actor's span joins the trace
                method, args = "traced", (carrier, method, *args)
            try:
                return await self._call(method, args, kwargs)
            finally:
                self.inflight -= 1

    @abstractmethod
    async def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

    async def wait_alive(self, timeout: float = 60.0) -> None:
        """Wait until the actor answers (after a restart), up to ``timeout`` seconds."""
        await self.call(ShellBase.ping)

    @abstractmethod
    async def kill(self) -> None:
        """Kill the actor's process (Ray restarts it); used by fault-injection tests."""

    @abstractmethod
    async def memory_rss(self) -> int:
        """Resident memory of the actor's process in bytes."""


__all__ = ["Service", "ShellT"]
