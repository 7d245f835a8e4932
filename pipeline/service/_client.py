"""The thin client of conversations held by the local service.

:class:`RemoteCoordinator` satisfies
:class:`~ollm_cli.pipeline.contract.ConversationContract` over the service's
Unix socket (:class:`~ollm_cli.pipeline.service._socket.ServiceConnection`):
each operation is one typed request, each answer one typed reply, and a
turn's events are pushed as they happen and published on this process's
:class:`~ollm_cli.pipeline.events.EventBus`, so the chat renders them as it
does in-process. A tool-approval question comes the same way; the answer goes
back as a request. The conversation itself (its active context, the turn in
flight, its background work) lives in the service's
:class:`~ollm_cli.pipeline.service.hosting._host.PipelineHost`; this process imports no
Ray.

If the service dies under a call, the call raises
:class:`~ollm_cli.pipeline.errors.ServiceLostError` (exit code 8).

The messages of a conversation's life (:mod:`~ollm_cli.pipeline.service._messages`)
are imported with this module; those of the chat's commands
(:mod:`~ollm_cli.pipeline.service._protocol`) when the first is sent: a warm
``ollm run -p`` builds no model it does not use.

Example::

    connection = ServiceConnection(settings, Path.cwd())
    client = RemoteCoordinator(connection, events=EventBus())
    sid = await client.start_session()
    result = await client.run_turn(sid, "Hello")
    await client.end_session(sid)
    await connection.shutdown()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator._turn_result import AskCallback, TurnResult
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.events import EventBus
from ollm_cli.pipeline.records import CloseReport
from ollm_cli.pipeline.service._connection import ServiceConnection
from ollm_cli.pipeline.service._messages import (
    ENDING,
    AnswerApproval,
    ApprovalAsked,
    CancelTurn,
    EndSession,
    Failed,
    Notices,
    OpenSession,
    RunTurn,
    SessionOpened,
    TakeNotices,
    TurnCancelled,
    TurnEnded,
    TurnEvent,
    TurnFailed,
)
from ollm_cli.pipeline.tools import ToolGrant

if TYPE_CHECKING:
    from ollm_cli.pipeline.compression import CompressionResult, SnapshotInfo
    from ollm_cli.pipeline.context import ContextEntry, ContextSource
    from ollm_cli.pipeline.contract import ConversationContract, Lifecycle
    from ollm_cli.pipeline.records import SearchHit, Session, SessionSummary, StoreHealth
    from ollm_cli.pipeline.service._protocol import Reply, SessionRequest

ReplyT = TypeVar("ReplyT")


@dataclass
class RemoteConversation:
    """What the client knows of a conversation held by the service."""

    session_id: str
    model: str


class RemoteContext:
    """``/context``: the conversation's context entries, held by the service."""

    def __init__(self, client: RemoteCoordinator) -> None:
        self._client = client

    async def entries(self, session_id: str) -> list[ContextEntry]:
        from ollm_cli.pipeline.service._protocol import ContextEntries, ListContext

        reply = await self._client.ask(ListContext(session_id=session_id), ContextEntries)
        return reply.entries

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
        from ollm_cli.pipeline.service._protocol import AddContext

        await self._client.connection.request(
            AddContext(
                session_id=session_id,
                key=key,
                content=content,
                priority=priority,
                source=source,
                ttl=ttl,
            )
        )

    async def remove(self, session_id: str, key: str) -> bool:
        from ollm_cli.pipeline.service._protocol import RemoveContext, Removed

        reply = await self._client.ask(RemoveContext(session_id=session_id, key=key), Removed)
        return reply.removed


class RemoteCoordinator:
    """The conversations of this command, held by the local service (see the module)."""

    def __init__(
        self,
        connection: ServiceConnection,
        *,
        events: EventBus | None = None,
        ask: AskCallback | None = None,
        grant: ToolGrant | None = None,
        discard_failed: bool = False,
    ) -> None:
        self.connection = connection
        self.settings: OllmSettings = connection.settings
        self.events = events or EventBus()
        self.ask_user = ask
        self.grant = grant
        self.discard_failed = discard_failed
        self.conversations: dict[str, RemoteConversation] = {}
        self.context = RemoteContext(self)

    async def ask(self, request: SessionRequest, reply: type[ReplyT]) -> ReplyT:
        """Send ``request``; its reply, which must be a ``reply``."""
        answer: Reply = await self.connection.request(request)
        if not isinstance(answer, reply):
            raise OllmError(
                f"the OLLM service answered {request.type} with {answer.type}",
                hint="`ollm service stop` and try again (a service of another build?)",
            )
        return answer

    async def start_session(
        self,
        *,
        model: str | None = None,
        resume: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
    ) -> str:
        """Attach to a new conversation, or to ``resume`` (as the service holds it)."""
        opened = await self.ask(
            OpenSession(
                resume=resume,
                model=model,
                title=title,
                tags=tags,
                system_prompt=system_prompt,
                interactive=self.ask_user is not None,
                grant=self.grant,
                discard_failed=self.discard_failed,
            ),
            SessionOpened,
        )
        self.conversations[opened.session_id] = RemoteConversation(opened.session_id, opened.model)
        return opened.session_id

    async def end_session(self, session_id: str) -> None:
        """Leave the conversation: the service finishes its background work and closes it."""
        self.conversations.pop(session_id, None)
        await self.connection.request(EndSession(session_id=session_id))

    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Run one turn in the service, publishing its events here as they come (only
        the kinds this process's subscribers want travel)."""
        wanted = self.events.wanted()
        kinds = sorted(wanted) if wanted is not None else None
        try:
            async for item in self.connection.stream(
                RunTurn(session_id=session_id, text=text, kinds=kinds), ENDING
            ):
                if isinstance(item, TurnEvent):
                    self.events.publish(item.event)
                elif isinstance(item, ApprovalAsked):
                    approved = bool(await self.ask_user(item.call)) if self.ask_user else False
                    await self.connection.request(
                        AnswerApproval(
                            session_id=session_id, call_id=item.call.id, approved=approved
                        )
                    )
                elif isinstance(item, TurnEnded):
                    return item.result
                elif isinstance(item, TurnFailed):
                    raise item.failure.exception()
                elif isinstance(item, Failed):
                    raise item.exception()
                elif isinstance(item, TurnCancelled):
                    raise asyncio.CancelledError
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.connection.request(CancelTurn(session_id=session_id)))
            raise
        raise OllmError("the OLLM service ended the turn without a result")

    async def _publish_pending(self, session_id: str) -> None:
        """Show what the conversation did since its last turn (a compression)."""
        from ollm_cli.pipeline.service._protocol import Pending, PendingEvents

        pending = await self.ask(PendingEvents(session_id=session_id), Pending)
        for event in pending.events:
            self.events.publish(event)

    # -------------------------------------------------------- slash commands

    async def recent_sessions(
        self, limit: int, *, this_folder: bool = False, with_messages: bool = False
    ) -> list[SessionSummary]:
        from ollm_cli.pipeline.service._protocol import RecentSessions, Sessions

        request = RecentSessions(limit=limit, this_folder=this_folder, with_messages=with_messages)
        return (await self.ask(request, Sessions)).sessions

    async def search_sessions(self, query: str, limit: int) -> list[SearchHit]:
        from ollm_cli.pipeline.service._protocol import SearchHits, SearchSessions

        return (await self.ask(SearchSessions(query=query, limit=limit), SearchHits)).hits

    async def switch_model(self, session_id: str, model: str) -> None:
        from ollm_cli.pipeline.service._protocol import SwitchModel

        await self.connection.request(SwitchModel(session_id=session_id, model=model))
        conversation = self.conversations.get(session_id)
        if conversation is not None:
            conversation.model = model

    async def provider_models(self) -> list[str]:
        from ollm_cli.pipeline.service._protocol import ListModels, Models

        return (await self.ask(ListModels(), Models)).names

    async def get_session(self, session_id: str) -> Session:
        from ollm_cli.pipeline.service._protocol import GetSession, SessionRecord

        return (await self.ask(GetSession(session_id=session_id), SessionRecord)).session

    async def set_title(self, session_id: str, title: str) -> None:
        from ollm_cli.pipeline.service._protocol import SetTitle

        await self.connection.request(SetTitle(session_id=session_id, title=title))

    async def compress_now(
        self, session_id: str, focus: str | None = None
    ) -> CompressionResult | None:
        from ollm_cli.pipeline.service._protocol import Compressed, CompressNow

        reply = await self.ask(CompressNow(session_id=session_id, focus=focus), Compressed)
        await self._publish_pending(session_id)
        return reply.result

    async def snapshot_now(self, session_id: str) -> SnapshotInfo:
        from ollm_cli.pipeline.service._protocol import SnapshotNow, SnapshotSaved

        return (await self.ask(SnapshotNow(session_id=session_id), SnapshotSaved)).info

    # -------------------------------------------------------- store and exit

    async def store_health(self) -> StoreHealth:
        """The store's health; before every prompt of the chat, so what a conversation
        did in the background since its turn (a compression) is shown here too."""
        from ollm_cli.pipeline.service._protocol import GetStoreHealth, Health

        for session_id in list(self.conversations):
            with contextlib.suppress(OllmError):
                await self._publish_pending(session_id)
        return (await self.ask(GetStoreHealth(), Health)).health

    async def take_notices(self) -> list[str]:
        return (await self.ask(TakeNotices(), Notices)).lines

    async def close_recording(self) -> CloseReport:
        """Nothing to close here: the service's session store stays open for its other
        clients and is closed, with its report, when the service stops."""
        return CloseReport(ok=True)

    def compression_pending(self, session_id: str) -> str | None:
        """Nothing to wait for here: the service finishes and records a compression
        still running after this command leaves (as it does the title and saves)."""
        return None

    async def finish_compression(self, session_id: str) -> bool:
        return True

    async def skip_compression(self, session_id: str) -> None:
        """The service's compression goes on; it costs this command nothing."""


def open_conversations(
    settings: OllmSettings,
    workspace: Path,
    *,
    events: EventBus | None = None,
    ask: AskCallback | None = None,
    grant: ToolGrant | None = None,
    discard_failed: bool = False,
    announce_start: Callable[[], None] | None = None,
) -> tuple[Lifecycle, ConversationContract]:
    """The conversations of ``ollm run`` and what to start and shut down around them,
    on ``settings.runtime.kind``: on the service (the default) a connection to its
    socket and the thin client over it, which imports no Ray; else a runtime of
    this command's own and a coordinator on it. ``grant``: the tools their turns run
    without asking (``--allow-tools``, ``--approve auto``); ``discard_failed``: a new
    session whose every request failed at the provider is not kept; ``announce_start``:
    called when the local service is about to be started for them (seconds)."""
    if settings.runtime.kind == "service":
        connection = ServiceConnection(settings, workspace, announce=announce_start)
        remote = RemoteCoordinator(
            connection, events=events, ask=ask, grant=grant, discard_failed=discard_failed
        )
        return connection, remote
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.runtime import create_runtime

    runtime = create_runtime(settings, workspace)
    coordinator = Coordinator(
        runtime,
        settings,
        workspace=workspace,
        events=events,
        ask=ask,
        grant=grant,
        discard_failed=discard_failed,
    )
    return runtime, coordinator


__all__ = [
    "RemoteContext",
    "RemoteConversation",
    "RemoteCoordinator",
    "open_conversations",
]
