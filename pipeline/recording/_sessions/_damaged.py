"""Session files that do not parse: moved aside, and rebuilt from the journal if it can."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from ollm_cli.pipeline.atomic_file import fsync_dir
from ollm_cli.pipeline.errors import SessionCorruptError
from ollm_cli.pipeline.recording._document import SessionDocument
from ollm_cli.pipeline.recording._journal import entries_for
from ollm_cli.pipeline.recording._sessions._folder import SessionFolder
from ollm_cli.pipeline.recording._sessions._reasons import os_reason
from ollm_cli.pipeline.recording._sessions._replay import rebuild_from_journal

logger = logging.getLogger(__name__)

CORRUPT_MARK = ".corrupt-"
"""What a damaged file's name gets, before a timestamp, when it is moved aside."""


class DamagedFiles:
    """Sets the damaged session files of one folder aside (``{id}.json.corrupt-<time>``)
    and rebuilds their sessions from the journal when it holds them from creation."""

    def __init__(self, folder: SessionFolder) -> None:
        self.folder = folder

    def handle_corrupt(self, sid: str, path: Path, problem: str) -> SessionDocument:
        """Move a damaged file aside and rebuild the session from the journal if it can.

        A read-only store moves nothing: it rebuilds from the journal in memory
        or names the damaged file. Raises :class:`SessionCorruptError` when the
        journal does not hold it all.
        """
        folder = self.folder
        if folder.read_only:
            doc = rebuild_from_journal(sid, entries_for(folder.journal_dir, sid))
            if doc is None:
                raise SessionCorruptError(
                    f"session {sid} cannot be read: its file {path.name} is damaged ({problem})",
                    hint="`ollm sessions doctor --fix` moves it aside and rebuilds what the "
                    "journal holds; nothing was changed",
                )
            return doc
        aside = self.move_aside(sid, path, problem)
        doc = rebuild_from_journal(sid, entries_for(folder.journal_dir, sid))
        where = f"it was moved to {aside.name}" if aside else "it was left in place"
        if doc is None:
            raise SessionCorruptError(
                f"session {sid} cannot be read: its file is damaged ({problem}); {where}",
                hint="start a new session; the damaged file is kept for inspection",
            )
        message = f"session {sid} was rebuilt from its journal ({len(doc.messages)} messages)"
        logger.warning(message)
        folder.recovery_report.append(message)
        return doc

    def move_aside(self, sid: str, path: Path, problem: str) -> Path | None:
        """Rename the damaged file out of the way; its new path (None: it could not)."""
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = path.with_name(f"{path.name}{CORRUPT_MARK}{stamp}")
        try:
            os.rename(path, aside)
            fsync_dir(self.folder.data_dir)
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.error("cannot move damaged session file %s aside: %s", path.name, os_reason(exc))
            return None
        message = f"session {sid}: damaged file ({problem}) moved to {aside.name}"
        logger.error(message)
        self.folder.recovery_report.append(message)
        return aside

    def has_copy(self, sid: str) -> bool:
        """Whether a damaged file of ``sid`` was set aside earlier."""
        prefix = f"{sid}.json{CORRUPT_MARK}"
        return any(name.startswith(prefix) for name in os.listdir(self.folder.data_dir))
