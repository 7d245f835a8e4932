"""The thin client of a load or soak run held by the local service.

``ollm load`` and ``ollm soak`` on the service runtime send one
:class:`~ollm_cli.pipeline.service._protocol.RunLoad` over the service's socket;
the pipeline host runs the harness on its shells, verifies the sessions and
answers with the report (see :mod:`ollm_cli.pipeline.service.hosting._host_load`). This
process imports no Ray and no runtime; it shows the turns as they finish and
asks the run to stop on Ctrl-C.

Example::

    load = RemoteLoad(ServiceConnection(settings, Path.cwd()), request, on_turn=print)
    report = await load.run()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.harness._load_models import LoadReport
from ollm_cli.pipeline.service._connection import ServiceConnection
from ollm_cli.pipeline.service._protocol import (
    Failed,
    LoadEnded,
    LoadProgress,
    RunLoad,
    StopLoad,
)


class RemoteLoad:
    """One load or soak run in the service, seen from the command (see the module)."""

    def __init__(
        self,
        connection: ServiceConnection,
        request: RunLoad,
        *,
        on_turn: Callable[[int], None] | None = None,
    ) -> None:
        self.connection = connection
        self.request = request
        self.on_turn = on_turn
        self._stopping: asyncio.Task[object] | None = None

    async def run(self) -> LoadReport:
        """Run it to its end (or to a stop) and return its verified report."""
        async for item in self.connection.stream(self.request, (LoadEnded,)):
            if isinstance(item, LoadProgress):
                if self.on_turn is not None:
                    self.on_turn(item.turns)
            elif isinstance(item, LoadEnded):
                return item.report
            elif isinstance(item, Failed):
                raise item.exception()
        raise OllmError("the OLLM service ended the load run without a report")

    def request_stop(self) -> None:
        """Ctrl-C: the service finishes the turns in flight, verifies and reports."""
        if self._stopping is None:
            stop = StopLoad(tag=self.request.options.tag)
            self._stopping = asyncio.ensure_future(self.connection.request(stop))
            self._stopping.add_done_callback(_ignore_failure)


def _ignore_failure(task: asyncio.Task[object]) -> None:
    # the run's own reply says how it ended; a lost service is raised there
    with contextlib.suppress(asyncio.CancelledError, OllmError):
        task.result()


__all__ = ["RemoteLoad"]
