"""The context of each conversation, as the context actor serves it.

A session's :class:`ContextManager` is built on first use from, in order:
the project files (``OLLM.md`` of the workspace and of the OLLM home), the
entries extensions contribute, and the entries saved for the session by the
:class:`ContextEntryStore` (so a restarted actor, or a later process, finds
what the user and the hooks added). Entries the user or a hook adds without a
time to live are saved again at once.

When a project file differs from what this session (a new session: the last
one) read, the session's first additions carry a notice naming it: a tool may
have written it since (see :class:`ProjectFileDigests`).

Example::

    contexts = SessionContexts(settings.services.context, workspace, store, [])
    contexts.add(session_id, "style", "Answer in French.", priority=10)
    contexts.additions(session_id).text
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ollm_cli.config.paths import ollm_home
from ollm_cli.config.settings import ContextSettings
from ollm_cli.pipeline.context._entry import ContextEntry, ContextSource
from ollm_cli.pipeline.context._entry_store import PERSISTED_SOURCES, ContextEntryStore
from ollm_cli.pipeline.context._manager import ContextAdditions, ContextManager
from ollm_cli.pipeline.context._project_files import ProjectFileDigests
from ollm_cli.pipeline.extensions import ExtensionContext


class SessionContexts:
    """A ContextManager per session, seeded with project, extension and saved entries."""

    def __init__(
        self,
        settings: ContextSettings,
        workspace: Path,
        store: ContextEntryStore,
        extension_entries: Sequence[ExtensionContext],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.workspace = workspace
        self.store = store
        self.extension_entries = list(extension_entries)
        self.digests = ProjectFileDigests(store.folder / "project-files.json")
        self._managers: dict[str, ContextManager] = {}

    def manager(self, session_id: str) -> ContextManager:
        """The session's manager, built on first use."""
        manager = self._managers.get(session_id)
        if manager is not None:
            return manager
        manager = ContextManager(self.settings, clock=self.clock)
        if self.settings.load_project_files:
            manager.load_project_files(self.workspace, ollm_home())
            for path in self.digests.changed(session_id, manager.project_digests):
                manager.add_notice(
                    f"{path} changed since a conversation last read it (a tool may have "
                    "written it): the model sees it as it is now; check it"
                )
        for contributed in self.extension_entries:
            manager.add_context(
                contributed.key,
                contributed.content,
                priority=contributed.priority,
                source="extension",
            )
        for entry in self.store.load(session_id):
            manager.add_context(
                entry.key, entry.content, priority=entry.priority, source=entry.source
            )
        self._managers[session_id] = manager
        return manager

    def add(
        self,
        session_id: str,
        key: str,
        content: str,
        priority: int = 50,
        source: ContextSource = "user",
        ttl: float | None = None,
    ) -> None:
        """Add (or replace) an entry; one the user or a hook adds for good is saved."""
        manager = self.manager(session_id)
        manager.add_context(key, content, priority=priority, source=source, ttl=ttl)
        if source in PERSISTED_SOURCES and ttl is None:
            self.store.save(session_id, manager.get_context())

    def remove(self, session_id: str, key: str) -> bool:
        """Remove the entry ``key``; whether there was one."""
        manager = self.manager(session_id)
        removed = manager.remove_context(key)
        self.store.save(session_id, manager.get_context())
        return removed

    def entries(self, session_id: str) -> list[ContextEntry]:
        return self.manager(session_id).get_context()

    def additions(self, session_id: str) -> ContextAdditions:
        return self.manager(session_id).build_additions()

    def drop(self, session_id: str) -> None:
        """Forget the session's manager (its saved entries stay on disk)."""
        self._managers.pop(session_id, None)
