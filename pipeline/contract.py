"""The conversation contract: everything a command uses of a conversation.

Two implementations stand for one thing, a conversation, and both satisfy
:class:`ConversationContract` (mypy checks that they do, where they are
built and handed to the chat, ``ollm run -p``, batch, load and soak):

- :class:`~ollm_cli.pipeline.coordinator.Coordinator` runs the conversation in
  this process (``--runtime inprocess``, ``--runtime ray``);
- :class:`~ollm_cli.pipeline.service.RemoteCoordinator` is the client of a
  conversation held by the local service (the default runtime), so its turn
  in flight and its background work outlive the command.

A command is written once, against this contract: no ``isinstance`` on the
implementation, no method that only one of them has. Cancelling the task
that awaits :meth:`ConversationContract.run_turn` cancels the turn (Ctrl-C);
the part of the answer shown is recorded, marked interrupted. A tool call
that needs approval is asked through the ``ask`` callback the implementation
was built with.

:class:`HarnessCoordinator` adds what batch, load and soak runs read beside
the conversations: the runtime's shells (the store, memory, inbox depths).

Example::

    def chat(conversations: ConversationContract) -> None:
        sid = await conversations.start_session(resume="3f1c2a9e", model="qwen3")
        result = await conversations.run_turn(sid, "Hello")
        await conversations.end_session(sid)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: the contract costs a thin client of the service no import
    from collections.abc import Mapping

    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.compression import CompressionResult, SnapshotInfo
    from ollm_cli.pipeline.context import ContextEntry, ContextSource
    from ollm_cli.pipeline.coordinator import TurnResult
    from ollm_cli.pipeline.events import EventBus
    from ollm_cli.pipeline.records import (
        CloseReport,
        SearchHit,
        Session,
        SessionSummary,
        StoreHealth,
    )
    from ollm_cli.pipeline.runtime import Runtime


class ConversationView(Protocol):
    """What a command shows of a live conversation."""

    @property
    def session_id(self) -> str: ...

    @property
    def model(self) -> str:
        """The model the conversation's turns go to."""
        ...


class ContextEditor(Protocol):
    """``/context`` and a batch script's ``context``: a session's context entries."""

    async def entries(self, session_id: str) -> list[ContextEntry]:
        """The session's active entries, highest priority first."""
        ...

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
        """Add (or replace) the entry ``key`` of the session."""
        ...

    async def remove(self, session_id: str, key: str) -> bool:
        """Remove the entry ``key``; whether it was there."""
        ...


class ConversationContract(Protocol):
    """The conversations of one command (see the module)."""

    @property
    def settings(self) -> OllmSettings: ...

    @property
    def events(self) -> EventBus:
        """Where the conversations' events are published, as they happen."""
        ...

    @property
    def context(self) -> ContextEditor: ...

    @property
    def conversations(self) -> Mapping[str, ConversationView]:
        """The conversations this command has open, by session id."""
        ...

    # ------------------------------------------------------------- lifecycle

    async def start_session(
        self,
        *,
        model: str | None = None,
        resume: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
    ) -> str:
        """Create a session (or resume ``resume``, an id or unique prefix) and return
        its id; ``model``, when given, is the model of its turns, resumed or not."""
        ...

    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Run one user turn to its end; cancelling the awaiting task cancels it."""
        ...

    async def end_session(self, session_id: str) -> None:
        """Done with the session: its background work finishes, then it is closed."""
        ...

    # ------------------------------------------------------- slash commands

    async def recent_sessions(
        self, limit: int, *, this_folder: bool = False, with_messages: bool = False
    ) -> list[SessionSummary]:
        """``/sessions``, ``--continue`` and the resume picker: the ``limit`` most recent
        sessions; ``this_folder``: only those started in this command's workspace
        (``metadata.workingDir``); ``with_messages``: no empty session."""
        ...

    async def search_sessions(self, query: str, limit: int) -> list[SearchHit]:
        """The resume picker's filter: the sessions whose messages, tool calls, title,
        notes or tags match every word of ``query`` (a word's beginning), best first."""
        ...

    async def switch_model(self, session_id: str, model: str) -> None:
        """``/model NAME``: the session's next turns go to ``model`` (which the provider
        must have), and ``metadata.modeHistory`` records the change."""
        ...

    async def provider_models(self) -> list[str]:
        """``/model``: the models the provider of these conversations has."""
        ...

    async def get_session(self, session_id: str) -> Session:
        """``/history``: the session as recorded so far."""
        ...

    async def set_title(self, session_id: str, title: str) -> None:
        """``/title``."""
        ...

    async def compress_now(
        self, session_id: str, focus: str | None = None
    ) -> CompressionResult | None:
        """``/compress [focus]``: compress now and wait for it (``None``: nothing to do)."""
        ...

    async def snapshot_now(self, session_id: str) -> SnapshotInfo:
        """``/snapshot``: save the active context as it is now."""
        ...

    # ------------------------------------------------------- store and exit

    async def store_health(self) -> StoreHealth:
        """Records waiting for the disk and the last write error (the chat's warning)."""
        ...

    async def take_notices(self) -> list[str]:
        """Lines the user should see once: what the session store did on its own."""
        ...

    async def close_recording(self) -> CloseReport:
        """The command is done with the session store: what could not be made durable."""
        ...

    def compression_pending(self, session_id: str) -> str | None:
        """What a compression this command must wait for at exit does (``None``: none)."""
        ...

    async def finish_compression(self, session_id: str) -> bool:
        """Wait for that compression (at most ``finishOnExitS``); False if it did not end."""
        ...

    async def skip_compression(self, session_id: str) -> None:
        """Give it up (Ctrl-C while waiting at exit)."""
        ...


class Lifecycle(Protocol):
    """What a command starts before its conversations and shuts down after them: the
    runtime of its own pipeline, or its connection to the local service."""

    async def start(self) -> None: ...

    async def shutdown(self) -> None: ...


class HarnessCoordinator(ConversationContract, Protocol):
    """The conversations of a batch, load or soak run, and the shells they run on."""

    @property
    def runtime(self) -> Runtime:
        """The shells: read the store, sample memory and inboxes, kill an actor."""
        ...


__all__ = [
    "ContextEditor",
    "ConversationContract",
    "ConversationView",
    "HarnessCoordinator",
    "Lifecycle",
]
