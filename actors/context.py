"""The context actor: gives each conversation's ContextManager an inbox.

What a conversation's context is built from, and where its entries are kept,
is :class:`~ollm_cli.pipeline.context.SessionContexts`'s business.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.context import (
    ContextAdditions,
    ContextEntry,
    ContextEntryStore,
    ContextSource,
    SessionContexts,
)
from ollm_cli.pipeline.extensions import load_extensions


class ContextShell(ShellBase):
    """Keeps the context of every conversation."""

    def __init__(
        self, settings: OllmSettings, workspace: Path, clock: Callable[[], float] = time.time
    ) -> None:
        self.contexts = SessionContexts(
            settings.services.context,
            workspace,
            ContextEntryStore(settings.services.session.data_dir / ".context"),
            load_extensions(workspace=workspace).context_entries,
            clock,
        )

    def add_context(
        self,
        session_id: str,
        key: str,
        content: str,
        priority: int = 50,
        source: ContextSource = "user",
        ttl: float | None = None,
    ) -> None:
        self.contexts.add(session_id, key, content, priority, source, ttl)

    def remove_context(self, session_id: str, key: str) -> bool:
        return self.contexts.remove(session_id, key)

    def list_context(self, session_id: str) -> list[ContextEntry]:
        return self.contexts.entries(session_id)

    def additions(self, session_id: str) -> ContextAdditions:
        return self.contexts.additions(session_id)

    def drop_session(self, session_id: str) -> None:
        self.contexts.drop(session_id)
