"""The context actor: one ContextManager per conversation.

A conversation's manager starts with the project context files (``OLLM.md``)
and the entries extensions contribute; entries added by the user or by hooks
are saved beside the sessions (``<dataDir>/.context/<sessionId>.json``) so a
restarted actor rebuilds them from disk.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
from pydantic import TypeAdapter

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.paths import ensure_private_dir, ollm_home
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.context import ContextAdditions, ContextEntry, ContextManager, ContextSource
from ollm_cli.pipeline.extensions import load_extensions

logger = logging.getLogger(__name__)
_ENTRIES = TypeAdapter(list[ContextEntry])
_PERSISTED_SOURCES = {"user", "hook"}


class ContextShell(ShellBase):
    """Keeps a ContextManager per session, seeded with project and extension context."""

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        self.settings = settings.services.context
        self.workspace = workspace
        self.folder = settings.services.session.data_dir / ".context"
        self._managers: dict[str, ContextManager] = {}
        self._extension_entries = load_extensions().context_entries

    def _path(self, session_id: str) -> Path:
        return self.folder / f"{session_id}.json"

    def _manager(self, session_id: str) -> ContextManager:
        manager = self._managers.get(session_id)
        if manager is not None:
            return manager
        manager = ContextManager(self.settings)
        if self.settings.load_project_files:
            manager.load_project_files(self.workspace, ollm_home())
        for contributed in self._extension_entries:
            manager.add_context(
                contributed.key,
                contributed.content,
                priority=contributed.priority,
                source="extension",
            )
        path = self._path(session_id)
        if path.is_file():
            try:
                for entry in _ENTRIES.validate_json(path.read_bytes()):
                    manager.add_context(
                        entry.key,
                        entry.content,
                        priority=entry.priority,
                        source=entry.source,
                        ttl=None,
                    )
            except ValueError as error:
                logger.warning("context entries of %s are unreadable: %s", session_id, error)
        self._managers[session_id] = manager
        return manager

    def _save(self, session_id: str) -> None:
        entries = [
            e for e in self._manager(session_id).get_context() if e.source in _PERSISTED_SOURCES
        ]
        ensure_private_dir(self.folder)
        write_atomic(
            self._path(session_id), orjson.dumps(_ENTRIES.dump_python(entries, mode="json"))
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
        self._manager(session_id).add_context(
            key, content, priority=priority, source=source, ttl=ttl
        )
        if source in _PERSISTED_SOURCES and ttl is None:
            self._save(session_id)

    def remove_context(self, session_id: str, key: str) -> bool:
        removed = self._manager(session_id).remove_context(key)
        self._save(session_id)
        return removed

    def list_context(self, session_id: str) -> list[ContextEntry]:
        return self._manager(session_id).get_context()

    def additions(self, session_id: str) -> ContextAdditions:
        return self._manager(session_id).build_additions()

    def drop_session(self, session_id: str) -> None:
        self._managers.pop(session_id, None)
