"""A load or soak run held by a pipeline host: ``ollm load`` and ``ollm soak`` on
the local service.

The command sends :class:`~ollm_cli.pipeline.service._protocol.RunLoad`; the
host runs the :class:`~ollm_cli.pipeline.harness.LoadHarness` on its own shells
(the conversations' calls never leave the host's process), verifies the
recorded sessions and builds the report there. The client reads how many turns
finished (:meth:`HostedLoad.progress`, which waits for a change) and, at the
end, the report; it stops the run early with
:class:`~ollm_cli.pipeline.service._protocol.StopLoad` (Ctrl-C), and a client
that dies stops it too.

Example::

    load = HostedLoad.start(runtime, settings, workspace, request, client)
    item = await load.progress(seen=0, wait_s=5.0)     # LoadProgress or LoadEnded
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.events import EventBus
from ollm_cli.pipeline.harness import LoadHarness, LoadReport, build_report, latency_of_model
from ollm_cli.pipeline.harness import verify as verify_run
from ollm_cli.pipeline.runtime import Runtime
from ollm_cli.pipeline.service._protocol import Failed, LoadEnded, LoadItem, LoadProgress, RunLoad

RUNTIME_LABEL = "service"
"""What a load's report names as its runtime: the local service's."""


@dataclass
class HostedLoad:
    """One load or soak run in the host (see the module)."""

    request: RunLoad
    alive: Callable[[], bool]
    """Whether the client that asked for the run is still there."""
    harness: LoadHarness | None = None
    task: asyncio.Task[LoadReport] | None = None
    turns: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def start(
        cls,
        runtime: Runtime,
        settings: OllmSettings,
        workspace: Path,
        request: RunLoad,
        *,
        environment: dict[str, str],
        alive: Callable[[], bool],
    ) -> HostedLoad:
        load = cls(request, alive)
        coordinator = Coordinator(
            runtime, settings, workspace=workspace, events=EventBus(), environment=environment
        )
        load.harness = LoadHarness(coordinator, request.options, on_turn=load._turned)
        load.task = asyncio.ensure_future(load._run(runtime, settings))
        load.task.add_done_callback(lambda _: load.wake.set())
        return load

    @property
    def tag(self) -> str:
        return self.request.options.tag

    def _turned(self, done: int) -> None:
        self.turns = done
        self.wake.set()

    async def _run(self, runtime: Runtime, settings: OllmSettings) -> LoadReport:
        assert self.harness is not None
        run = await self.harness.run()
        run.runtime_kind = RUNTIME_LABEL
        verification = await verify_run(runtime, run.transcripts)
        return build_report(
            run,
            verification,
            provider=settings.provider.name,
            model_latency_ms=latency_of_model(settings),
            memory_threshold=self.request.memory_threshold,
            latency_threshold=self.request.latency_threshold,
        )

    def request_stop(self) -> None:
        """Finish the turns in flight, verify and report (Ctrl-C, or the client died)."""
        if self.harness is not None:
            self.harness.request_stop()

    def done(self) -> bool:
        return self.task is not None and self.task.done()

    async def progress(self, seen: int, wait_s: float) -> LoadItem:
        """The run's end (its report or why it failed) once it ended; else how many
        turns finished, as soon as that is more than ``seen`` (or after ``wait_s``)."""
        assert self.task is not None
        if self.turns == seen and not self.task.done():
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), wait_s)
        if not self.task.done():
            return LoadProgress(turns=self.turns)
        if self.task.cancelled():
            return Failed.of(OllmError("the load run was stopped with the OLLM service"))
        error = self.task.exception()
        if error is not None:
            return Failed.of(error)
        return LoadEnded(report=self.task.result())


__all__ = ["HostedLoad"]
