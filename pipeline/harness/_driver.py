"""What batch, load and soak runs need of a coordinator, as one typed interface.

Two coordinators satisfy it: :class:`~ollm_cli.pipeline.coordinator.Coordinator`,
which runs the conversations in this process (``--runtime inprocess``, ``--runtime
ray``), and :class:`~ollm_cli.pipeline.service.RemoteCoordinator`, whose
conversations live in the local service, so their background work and a turn in
flight outlive the command. The harness is written once, against this.

Example::

    def runner(coordinator: HarnessCoordinator) -> BatchRunner:
        return BatchRunner(coordinator, script, Path("out.results.jsonl"))
"""

from __future__ import annotations

from typing import Protocol

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import TurnResult
from ollm_cli.pipeline.events import EventBus
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.runtime import Runtime


class ContextEditor(Protocol):
    """Adds a session's context entries (a batch script's ``context``)."""

    async def add(self, session_id: str, key: str, content: str, *, priority: int = 50) -> None:
        """Add (or replace) the entry ``key`` of the session."""
        ...


class HarnessCoordinator(Protocol):
    """The coordinator of a batch, load or soak run (see the module)."""

    @property
    def runtime(self) -> Runtime:
        """The shells: read the store, sample memory and inboxes, kill an actor."""
        ...

    @property
    def settings(self) -> OllmSettings: ...

    @property
    def events(self) -> EventBus:
        """Where the conversations' events are published (a batch listens for loops)."""
        ...

    @property
    def context(self) -> ContextEditor: ...

    async def start_session(
        self,
        *,
        model: str | None = None,
        resume: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        system_prompt: str | None = None,
    ) -> str:
        """Create a session (or resume ``resume``) and return its id."""
        ...

    async def run_turn(self, session_id: str, text: str) -> TurnResult:
        """Run one user turn to its end."""
        ...

    async def end_session(self, session_id: str) -> None:
        """Done with the session: its background work finishes, then it is closed."""
        ...

    async def get_session(self, session_id: str) -> Session:
        """The session as recorded so far."""
        ...


__all__ = ["ContextEditor", "HarnessCoordinator"]
