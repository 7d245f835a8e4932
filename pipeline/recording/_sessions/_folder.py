"""The sessions folder of one store: where each file, journal and lock lives.

Example::

    folder = SessionFolder(settings.services.session)
    folder.path(sid)             # {dataDir}/{sid}.json
    lock = folder.lock(sid)      # {dataDir}/.locks/{sid}.lock, held until released
"""

from __future__ import annotations

import logging
from collections import deque
from pathlib import Path

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.config.settings import SessionSettings, SnapshotSettings
from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.errors import SessionError, StorageError
from ollm_cli.pipeline.recording._lock import SessionLock
from ollm_cli.pipeline.recording._sessions._reasons import os_reason

logger = logging.getLogger(__name__)

JOURNAL_DIR = ".journal"
LOCKS_DIR = ".locks"
MAX_NOTICES = 100
"""Lines for the user kept until someone takes them (the chat does, after each turn);
a service nobody reads keeps the latest, not all of them."""


class SessionFolder:
    """One store's sessions folder: its paths, its writer locks, whether the store may
    still write there, and the lines it has for the user."""

    def __init__(
        self,
        settings: SessionSettings,
        *,
        snapshots_dir: Path | None = None,
        read_only: bool = False,
    ) -> None:
        self.settings = settings
        self.data_dir: Path = settings.data_dir
        self.snapshots_dir: Path = snapshots_dir or SnapshotSettings().data_dir
        self.read_only = read_only
        self.journal_dir = self.data_dir / JOURNAL_DIR
        self.locks_dir = self.data_dir / LOCKS_DIR
        self.closed = False
        self.notices: deque[str] = deque(maxlen=MAX_NOTICES)
        """Lines the user should see once (retention, replayed rescue files)."""
        self.recovery_report: list[str] = []
        """What was repaired since the store opened (``ollm sessions doctor`` lists it)."""
        if not read_only:
            try:
                ensure_private_dir(self.data_dir)
            except OSError as exc:
                logger.warning(
                    "sessions folder %s cannot be created: %s", self.data_dir, exc.strerror
                )

    def path(self, sid: str) -> Path:
        """The session's file."""
        return self.data_dir / f"{sid}.json"

    def lock_path(self, sid: str) -> Path:
        """The session's writer lock file."""
        return self.locks_dir / f"{sid}.lock"

    def ensure_dirs(self) -> None:
        """Create the folder and its lock folder (0700); :class:`StorageError` if it cannot."""
        try:
            ensure_private_dir(self.data_dir)
            ensure_private_dir(self.locks_dir)
        except OSError as exc:
            raise StorageError(
                f"cannot use the sessions folder {self.data_dir}: {os_reason(exc)}",
                hint="fix its permissions or set services.session.dataDir to a writable folder",
            ) from None

    def lock(self, sid: str) -> SessionLock:
        """Take the session's writer lock (:class:`SessionLockedError` if another holds it)."""
        self.ensure_dirs()
        return SessionLock.acquire(self.lock_path(sid), sid)

    def check_open(self) -> None:
        """Raise :class:`SessionError` unless the store may write: not closed, not read-only."""
        if self.closed:
            raise SessionError(
                "this session store is closed", hint="create a new ChatRecordingService"
            )
        if self.read_only:
            raise SessionError(
                "this session store was opened read-only", hint="open it without read_only"
            )

    def write_file(self, path: Path, raw: bytes, sid: str) -> None:
        """Replace a session's file atomically; :class:`StorageError` saying why if it fails."""
        try:
            write_atomic(path, raw)
        except OSError as exc:
            reason = os_reason(exc)
            logger.info("cannot write session %s: %s", sid, reason)  # raised: said once
            raise StorageError(
                f"cannot write session {sid} in {self.data_dir}: {reason}",
                hint="free some disk space or fix the folder's permissions "
                "(services.session.dataDir), then try again",
            ) from None

    def note(self, message: str) -> None:
        """Keep a line for the user, once."""
        if message not in self.notices:
            self.notices.append(message)
