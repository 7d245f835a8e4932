"""The coordinator's side of the context actor: every change goes through here,
so each session's system-prompt additions are fetched only when they changed.

A session's additions change when an entry is added or removed (by the user,
a hook or a batch script, all through this client) or when an entry's TTL
runs out (the additions say when the first one does). Between those, a turn
reuses the additions of the previous one and costs no round trip to the
context actor. The actor stays the owner of the entries: it keeps the
user's and hooks' entries on disk and answers listings.

Example::

    context = ContextClient(runtime)
    await context.add(session_id, "style", "Answer in French.", priority=80)
    additions = await context.additions(session_id)   # fetched: something changed
    additions = await context.additions(session_id)   # the same, from memory
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ollm_cli.actors.context import ContextShell
from ollm_cli.pipeline.context import ContextAdditions, ContextEntry, ContextSource
from ollm_cli.pipeline.runtime import Runtime, Service


class ContextClient:
    """Changes and reads a session's context entries through the context actor."""

    def __init__(self, runtime: Runtime, clock: Callable[[], float] = time.time) -> None:
        self.runtime = runtime
        self.clock = clock
        self._additions: dict[str, ContextAdditions] = {}
        self._changes: dict[str, int] = {}

    @property
    def service(self) -> Service[ContextShell]:
        """The context actor (the runtime creates it when it starts)."""
        return self.runtime.context

    async def additions(self, session_id: str) -> ContextAdditions:
        """The additions of the session's next request."""
        known = self._additions.get(session_id)
        if known is not None and (known.valid_until is None or self.clock() < known.valid_until):
            return known
        changes = self._changes.get(session_id, 0)
        additions: ContextAdditions = await self.service.call(ContextShell.additions, session_id)
        if self._changes.get(session_id, 0) == changes:  # nothing changed meanwhile
            # its notices are for once: the next turns reuse it without them
            self._additions[session_id] = additions.model_copy(update={"notices": []})
        return additions

    def _changed(self, session_id: str) -> None:
        self._additions.pop(session_id, None)
        self._changes[session_id] = self._changes.get(session_id, 0) + 1

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
        self._changed(session_id)
        try:
            await self.service.call(
                ContextShell.add_context, session_id, key, content, priority, source, ttl
            )
        finally:
            self._changed(session_id)

    async def remove(self, session_id: str, key: str) -> bool:
        """Remove the entry ``key``; whether it was there."""
        self._changed(session_id)
        try:
            removed: bool = await self.service.call(ContextShell.remove_context, session_id, key)
        finally:
            self._changed(session_id)
        return removed

    async def entries(self, session_id: str) -> list[ContextEntry]:
        """The session's active entries, highest priority first."""
        entries: list[ContextEntry] = await self.service.call(ContextShell.list_context, session_id)
        return entries

    async def drop(self, session_id: str) -> None:
        """Forget the session's live entries (its conversation ended)."""
        self._additions.pop(session_id, None)
        self._changes.pop(session_id, None)
        await self.service.call(ContextShell.drop_session, session_id)
