"""The thin client of a conversation that runs in the local service.

:class:`RemoteCoordinator` offers what ``ollm run`` and its chat use of a
:class:`~ollm_cli.pipeline.coordinator.Coordinator` (start, resume and end a session,
run a turn, the slash commands), while the conversation itself (its active
context, the turn in flight, its background work) lives in the service's
:class:`~ollm_cli.pipeline.service._host.PipelineHost`. A turn's events come back by long
polling and are published on this process's :class:`~ollm_cli.pipeline.events.EventBus`,
so the chat renders them as before; a tool-approval question comes back the
same way and the answer goes to the host.

If the service dies under a call, the call raises
:class:`~ollm_cli.pipeline.errors.ServiceLostError` (exit code 8).

Example::

    runtime = ServiceRuntime(settings, Path.cwd())
    await runtime.start()
    client = RemoteCoordinator(runtime, events=EventBus())
    sid = await client.start_session()
    result = await client.run_turn(sid, "Hello")
    await client.end_session(sid)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import CompressionResult, SnapshotInfo
from ollm_cli.pipeline.context import ContextEntry, ContextSource
from ollm_cli.pipeline.contract import HarnessCoordinator
from ollm_cli.pipeline.coordinator import AskCallback, Coordinator, TurnResult
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.events import EventBus
from ollm_cli.pipeline.recording import CloseReport, StoreHealth
from ollm_cli.pipeline.records import Session, SessionSummary
from ollm_cli.pipeline.runtime import Runtime, _unwrap
from ollm_cli.pipeline.service._runtime import ServiceRuntime, service_lost

POLL_S = 5.0
WATCH_S = 0.5
"""How often a waiting client checks that the service's daemon still runs."""
LIVE_KINDS = frozenset(
    {"model:text", "model:thinking", "pipeline:status", "session:message", "tool:call"}
)
"""Event kinds shown as they happen: a client that wants one polls for them during
the turn; one that wants none of them gets the turn's events with its result."""


@dataclass
class RemoteConversation:
    """What the client knows of a conversation held by the service."""

    session_id: str
    model: str


class RemoteContext:
    """``/context``: the conversation's context entries, through its coordinator."""

    def __init__(self, client: RemoteCoordinator) -> None:
        self._client = client

    async def entries(self, session_id: str) -> list[ContextEntry]:
        entries: list[ContextEntry] = await self._client.session_call(
            session_id, "context.entries", session_id
        )
        return entries

    async def add(
        self,
        session_id: str,
        key: str,
        content: str,
        *,
        priority: int = 50,
        source: ContextSource = "user",
        ttl: float | None = None,
    ) -> None:
        await self._client.session_call(
            session_id,
            "context.add",
            session_id,
            key,
            content,
            priority=priority,
            source=source,
            ttl=ttl,
        )

    async def remove(self, session_id: str, key: str) -> bool:
        return bool(await self._client.session_call(session_id, "context.remove", session_id, key))


class RemoteCoordinator:
    """A coordinator's interface, served by the local service (see the module)."""

    def __init__(
        self,
        runtime: ServiceRuntime,
        *,
        events: EventBus | None = None,
        ask: AskCallback | None = None,
        environment: dict[str, str] | None = None,
    ) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.events = events or EventBus()
        self.ask = ask
        self.environment = dict(os.environ if environment is None else environment)
        self.conversations: dict[str, RemoteConversation] = {}
        self.context = RemoteContext(self)
        self._pid = os.getpid()
        self._started: float | None = None
        self._checked_at = float("-inf")
        self._alive = True

    @property
    def host(self) -> Any:
        return self.runtime.host

    async def _remote(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call the host; if the service's daemon dies meanwhile, stop waiting at once
        (Ray itself would take a minute to give up on its head)."""
        from ray.exceptions import RayActorError, RayTaskError

        from ollm_cli.pipeline.service._daemon import connected

        call = asyncio.ensure_future(
            self._await(getattr(self.host, method).remote(*args, **kwargs))
        )
        connection = connected()
        try:
            while True:
                done, _ = await asyncio.wait([call], timeout=WATCH_S)
                if done:
                    return call.result()
                if connection is not None and not self._service_alive(connection.state):
                    call.cancel()
                    raise service_lost()
        except RayTaskError as error:
            raise _unwrap(error) from None
        except RayActorError as error:
            raise service_lost(error) from None
        finally:
            if not call.done():
                call.cancel()

    def _service_alive(self, state: Any) -> bool:
        """Whether the service's daemon runs: asked at most every ``WATCH_S`` however
        many calls wait (a load has a hundred at once)."""
        now = time.monotonic()
        if now - self._checked_at >= WATCH_S:
            self._checked_at, self._alive = now, bool(state.alive())
        return self._alive

    @staticmethod
    async def _await(ref: Any) -> Any:
        return await ref

    async def start_session(
        self,
        *,
        resume: str | None = None,
        continue_latest: bool = False,
        model: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
    ) -> str:
        """Attach to a new conversation, or to ``resume`` (as the service holds it);
        ``title``, ``tags`` and ``system_prompt`` as in
        :meth:`~ollm_cli.pipeline.coordinator.Coordinator.start_session`."""
        if self._started is None:
            import psutil

            self._started = psutil.Process(self._pid).create_time()
        sid, model_name = await self._remote(
            "open_session",
            self._pid,
            self._started,
            resume=resume,
            continue_latest=continue_latest,
            environment=self.environment,
            interactive=self.ask is not None,
            model=model,
            title=title,
            tags=tags,
            system_prompt=system_prompt,
        )
        self.conversations[sid] = RemoteConversation(sid, model_name)
        return str(sid)

    async def end_session(self, session_id: str) -> None:
        """Leave the conversation: the service finishes its background work and closes it."""
        self.conversations.pop(session_id, None)
        await self._remote("detach", session_id, self._pid)

    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Run one turn in the service, publishing here the events this process's
        subscribers want: as they come when one is shown live (the chat), else with
        the turn's result, in the one call that runs the turn (a batch, a load)."""
        wanted = self.events.wanted()
        live = wanted is None or bool(wanted & LIVE_KINDS)
        kinds = sorted(wanted) if wanted is not None else None
        try:
            items, cursor = await self._remote(
                "start_turn", session_id, self._pid, text, kinds, 0.0 if live else POLL_S
            )
            while True:
                for kind, value in items:
                    if kind == "event":
                        self.events.publish(value)
                    elif kind == "approval":
                        approved = bool(await self.ask(value)) if self.ask else False
                        await self._remote("answer", session_id, self._pid, value.id, approved)
                    elif kind == "result":
                        result: TurnResult = value
                        return result
                    elif kind == "error":
                        raise value
                    elif kind == "cancelled":
                        raise asyncio.CancelledError
                items, cursor = await self._remote(
                    "next_events", session_id, self._pid, cursor, POLL_S
                )
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self._remote("cancel_turn", session_id, self._pid)
            raise

    async def session_call(self, session_id: str, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self._remote("session_call", session_id, self._pid, method, *args, **kwargs)

    async def recent_sessions(self, limit: int) -> list[SessionSummary]:
        """The ``limit`` most recent sessions (for ``/sessions`` and the resume picker)."""
        return await self.runtime.recording.call(RecordingShell.list_sessions, limit=limit)

    async def get_session(self, session_id: str) -> Session:
        """The session as recorded so far."""
        return await self.runtime.recording.call(RecordingShell.get_session, session_id)

    async def set_title(self, session_id: str, title: str) -> None:
        """Give the session a title (``/title``)."""
        await self.runtime.recording.call(RecordingShell.set_title, session_id, title)

    async def store_health(self) -> StoreHealth:
        """Records waiting for the disk and the last write error (the chat's warning)."""
        return await self.runtime.recording.call(RecordingShell.health)

    async def take_notices(self) -> list[str]:
        """Lines the user should see once: what the service's session store did on its own."""
        return await self.runtime.recording.call(RecordingShell.take_notices)

    async def close_recording(self) -> CloseReport:
        """Nothing to close here: the service's session store stays open for its other
        clients and is closed, with its report, when the service stops."""
        return CloseReport(ok=True)

    async def compress_now(
        self, session_id: str, focus: str | None = None
    ) -> CompressionResult | None:
        result: CompressionResult | None = await self.session_call(
            session_id, "compress_now", session_id, focus
        )
        return result

    async def snapshot_now(self, session_id: str) -> SnapshotInfo:
        info: SnapshotInfo = await self.session_call(session_id, "snapshot_now", session_id)
        return info

    def compression_pending(self, session_id: str) -> str | None:
        """Nothing to wait for here: the service finishes and records a compression
        still running after this command leaves (as it does the title and saves)."""
        return None

    async def finish_compression(self, session_id: str) -> bool:
        return True

    async def skip_compression(self, session_id: str) -> None:
        """The service's compression goes on; it costs this command nothing."""


def coordinator_for(
    runtime: Runtime,
    settings: OllmSettings,
    workspace: Path,
    *,
    events: EventBus | None = None,
    ask: AskCallback | None = None,
) -> HarnessCoordinator:
    """The conversations of a command on ``runtime`` (the one place that chooses):
    on the local service's runtime they live in the service (a
    :class:`RemoteCoordinator`), so their background work and a turn in flight
    outlive the command; on any other runtime they run in this process. ``ask``
    answers tool-approval questions (``None``: nobody to ask, as in a batch)."""
    if isinstance(runtime, ServiceRuntime):
        return RemoteCoordinator(runtime, events=events, ask=ask)
    return Coordinator(runtime, settings, workspace=workspace, events=events, ask=ask)


__all__ = [
    "OllmError",
    "RemoteContext",
    "RemoteConversation",
    "RemoteCoordinator",
    "coordinator_for",
]
