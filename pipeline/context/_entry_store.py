"""Where a session's own context entries are kept between processes.

Entries added by the user (``/context add``) or by hooks are saved beside the
sessions, one file a session: ``<dataDir>/.context/<sessionId>.json``, a JSON
array of :class:`ContextEntry` in their camelCase form, written atomically
(0600, folder 0700). Entries with a time to live, and those of extensions and
project files (which are rebuilt from their sources), are not saved.

Example::

    store = ContextEntryStore(settings.services.session.data_dir / ".context")
    store.save(session_id, manager.get_context())
    for entry in store.load(session_id): ...
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
from pydantic import TypeAdapter

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.context._entry import ContextEntry
from ollm_cli.pipeline.recording import checked_id

logger = logging.getLogger(__name__)

_ENTRIES = TypeAdapter(list[ContextEntry])
PERSISTED_SOURCES = frozenset({"user", "hook"})
"""Sources whose entries are saved; the others are rebuilt from where they came from."""


class ContextEntryStore:
    """One JSON file of saved entries per session, in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, session_id: str) -> Path:
        """The file of ``session_id`` (checked: it can only name a file in the folder)."""
        return self.folder / f"{checked_id(session_id)}.json"

    def load(self, session_id: str) -> list[ContextEntry]:
        """The saved entries of ``session_id`` (none when the file is missing or unreadable)."""
        path = self.path(session_id)
        if not path.is_file():
            return []
        try:
            return _ENTRIES.validate_json(path.read_bytes())
        except ValueError as error:
            logger.warning("context entries of %s are unreadable: %s", session_id, error)
            return []

    def save(self, session_id: str, entries: list[ContextEntry]) -> None:
        """Keep the entries of ``entries`` that are saved (see :data:`PERSISTED_SOURCES`)."""
        kept = [e for e in entries if e.source in PERSISTED_SOURCES and e.expires_at is None]
        ensure_private_dir(self.folder)
        write_atomic(self.path(session_id), orjson.dumps(_ENTRIES.dump_python(kept, mode="json")))
