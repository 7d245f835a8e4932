"""Retention and import: what leaves a sessions folder, and what comes in.

``maxSessions`` moves the least recently active sessions beyond it to the trash
folder (``{dataDir}/.trash/``, kept ``trashDays``), never a pinned one, one open
here or one another process writes; sessions can be deleted for good, trashed,
restored and imported from elsewhere.

Example::

    store.apply_retention()              # maxSessions and trashDays
    store.trash_session("3f2a")          # a unique prefix is accepted
    store.restore_from_trash("3f2a")
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.atomic_file import fsync_dir, write_atomic
from ollm_cli.pipeline.errors import (
    AmbiguousSessionIdError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
    StorageError,
)
from ollm_cli.pipeline.recording._document import DocumentError, SessionDocument
from ollm_cli.pipeline.recording._ids import (
    canonical_id,
    check_prefix,
    matches_prefix,
    new_session_id,
    session_id_of_file,
)
from ollm_cli.pipeline.recording._index import SessionIndex, SessionView, file_sig
from ollm_cli.pipeline.recording._journal import SessionJournal
from ollm_cli.pipeline.recording._lock import SessionLock, lock_holder
from ollm_cli.pipeline.recording._sessions import (
    CORRUPT_MARK,
    OpenSessions,
    SessionFolder,
    invalid_reason,
    os_reason,
)
from ollm_cli.pipeline.records import Record, Session

logger = logging.getLogger(__name__)

TRASH_DIR = ".trash"


class TrashEntry(Record):
    """A session removed by ``maxSessions``, kept in the trash folder for a while."""

    session_id: str
    title: str | None = None
    last_activity: str | None = None
    trashed_at: str
    expires_at: str
    size: int


class Retention:
    """Deleting, trashing, ``maxSessions`` and importing, for one store's folder.

    It works on the store's folder, journal, index and open sessions (the parts of
    :mod:`ollm_cli.pipeline.recording._sessions`); the store calls it and keeps its
    public methods.
    """

    def __init__(
        self,
        folder: SessionFolder,
        journal: SessionJournal,
        index: SessionIndex,
        sessions: OpenSessions,
    ) -> None:
        self.folder = folder
        self.journal = journal
        self.index = index
        self.sessions = sessions
        self.trash_dir = folder.data_dir / TRASH_DIR

    def delete_session(self, session_id: str) -> None:
        """Delete a session: its file, its journal records, its index row, its snapshots.

        Refuses (:class:`SessionLockedError`) a session another process is writing.
        """
        sid = self.sessions.resolve_id(session_id)
        self.folder.check_open()
        with self.sessions.opening:
            state = self.sessions.pop(sid)
            lock = (
                state.file_lock if state else SessionLock.acquire(self.folder.lock_path(sid), sid)
            )
            try:
                self._delete_files(sid)
            finally:
                lock.release()
        self.journal.forget(sid)
        self.sessions.save_errors.pop(sid, None)
        self.index.remove(sid)
        logger.info("deleted session %s", sid)

    def trash_session(self, session_id: str) -> None:
        """Move a session to the trash folder (``ollm sessions trash restore`` brings it back).

        Refuses (:class:`SessionLockedError`) a session another process is writing.
        """
        sid = self.sessions.resolve_id(session_id)
        self.folder.check_open()
        if sid in self.sessions:
            raise SessionLockedError(
                f"session {sid} is open here", hint="close it before moving it to the trash"
            )
        with self.sessions.opening:
            lock = SessionLock.acquire(self.folder.lock_path(sid), sid)
            try:
                doc, file_seq = self.sessions.load(sid)
                if doc.seq != file_seq:  # journaled records go to the trash with it
                    write_atomic(self.folder.path(sid), doc.encode())
                self._move_to_trash(sid)
            except OSError as exc:
                raise StorageError(
                    f"cannot move session {sid} to the trash: {os_reason(exc)}",
                    hint="check the sessions folder's permissions",
                ) from None
            finally:
                lock.release()
        self.journal.forget(sid)
        self.index.remove(sid)
        logger.info("moved session %s to the trash", sid)

    def _delete_files(self, sid: str) -> None:
        path = self.folder.path(sid)
        try:
            path.unlink(missing_ok=True)
            for name in os.listdir(self.folder.data_dir):
                if name.startswith(f"{sid}.json{CORRUPT_MARK}"):
                    (self.folder.data_dir / name).unlink(missing_ok=True)
            fsync_dir(self.folder.data_dir)
        except OSError as exc:
            raise StorageError(
                f"cannot delete session {sid}: {os_reason(exc)}",
                hint="check the sessions folder's permissions",
            ) from None
        snapshots = self.folder.snapshots_dir / sid
        if snapshots.is_dir():
            shutil.rmtree(snapshots, ignore_errors=True)

    def delete_oldest_sessions(
        self, keep: int, *, dry_run: bool = False, trash: bool = False
    ) -> list[str]:
        """Delete the least recently active sessions until ``keep`` remain.

        Never the sessions open in this store, pinned ones, or ones another
        process is writing. Returns the ids deleted (or, with ``dry_run``, the
        ids that would be).
        """
        if keep < 0:
            raise SessionError(
                f"cannot keep {keep} sessions", hint="give 0 or more sessions to keep"
            )
        self.index.refresh()
        sessions = self.index.oldest_first()
        excess = len(sessions) - keep
        chosen: list[str] = []
        for sid, pinned in sessions:
            if excess <= 0:
                break
            if pinned or sid in self.sessions:
                continue
            if dry_run:
                if lock_holder(self.folder.lock_path(sid)) is not None:
                    continue
            else:
                try:
                    if trash:
                        self.trash_session(sid)
                    else:
                        self.delete_session(sid)
                except SessionLockedError:
                    continue
                except SessionNotFoundError:
                    excess -= 1
                    continue
            chosen.append(sid)
            excess -= 1
        return chosen

    def apply_retention(self) -> list[str]:
        """Keep at most ``maxSessions``: the least recently active sessions beyond it go
        to the trash folder (never a pinned one, one open here or one another process
        writes), and trash older than ``trashDays`` is emptied. Says what it did in
        one line (:attr:`notices`); returns the ids moved to the trash."""
        expired = self._expire_trash()
        moved = self.delete_oldest_sessions(self.folder.settings.max_sessions, trash=True)
        if moved:
            shown = ", ".join(sid[:8] for sid in moved[:5]) + (", ..." if len(moved) > 5 else "")
            days = self.folder.settings.trash_days
            message = (
                f"maxSessions ({self.folder.settings.max_sessions}) moved {len(moved)} older "
                f"session(s) to the trash for {days} day(s): {shown}; "
                "`ollm sessions trash restore ID` brings one back"
            )
            if expired:
                message += f" ({len(expired)} expired from the trash)"
            logger.warning(message)
            self.folder.notices.append(message)
        elif expired:
            message = (
                f"emptied {len(expired)} session(s) older than "
                f"{self.folder.settings.trash_days} day(s) from the trash"
            )
            logger.warning(message)
            self.folder.notices.append(message)
        return moved

    def _trash_file(self, sid: str) -> Path:
        return self.trash_dir / f"{sid}.json"

    def _move_to_trash(self, sid: str) -> None:
        """Move one session (file, snapshots) to the trash; its writer lock is held."""
        ensure_private_dir(self.trash_dir)
        target = self._trash_file(sid)
        os.replace(self.folder.path(sid), target)
        os.utime(target)  # its time in the trash counts from now
        fsync_dir(self.folder.data_dir)
        fsync_dir(self.trash_dir)
        snapshots = self.folder.snapshots_dir / sid
        if snapshots.is_dir():
            with contextlib.suppress(OSError):
                os.replace(snapshots, self.trash_dir / f"{sid}.snapshots")

    def list_trash(self) -> list[TrashEntry]:
        """The sessions in the trash, most recently trashed first."""
        entries: list[TrashEntry] = []
        try:
            names = os.listdir(self.trash_dir)
        except FileNotFoundError:
            return []
        keep_s = self.folder.settings.trash_days * 86400
        for name in names:
            sid = session_id_of_file(name)
            if sid is None:
                continue
            path = self.trash_dir / name
            try:
                st = path.stat()
            except OSError:
                continue
            title = last = None
            try:
                doc = SessionDocument.decode(path.read_bytes(), sid)
                title = doc.metadata.get("title")
                last = str(doc.data["lastActivity"])
            except (OSError, DocumentError):
                pass
            trashed = datetime.fromtimestamp(st.st_mtime, UTC)
            entries.append(
                TrashEntry(
                    session_id=sid,
                    title=title,
                    last_activity=last,
                    trashed_at=trashed.isoformat(timespec="seconds").replace("+00:00", "Z"),
                    expires_at=datetime.fromtimestamp(st.st_mtime + keep_s, UTC)
                    .isoformat(timespec="seconds")
                    .replace("+00:00", "Z"),
                    size=st.st_size,
                )
            )
        entries.sort(key=lambda e: e.trashed_at, reverse=True)
        return entries

    def _trash_id(self, session_id_or_prefix: str) -> str:
        text = check_prefix(session_id_or_prefix)
        found = [e.session_id for e in self.list_trash() if matches_prefix(e.session_id, text)]
        if not found:
            raise SessionNotFoundError(
                f"no session in the trash starts with {text!r}",
                hint="`ollm sessions trash list` shows what the trash holds",
            )
        if len(found) > 1:
            raise AmbiguousSessionIdError(
                f"{text!r} matches {len(found)} sessions in the trash",
                hint="type more characters of the id",
            )
        return found[0]

    def restore_from_trash(self, session_id_or_prefix: str) -> str:
        """Bring a session back from the trash; returns its id."""
        self.folder.check_open()
        sid = self._trash_id(session_id_or_prefix)
        if self.folder.path(sid).exists():
            raise SessionError(
                f"session {sid} exists already; the copy in the trash was left there",
                hint="delete the existing one first if the trashed copy should replace it",
            )
        try:
            os.replace(self._trash_file(sid), self.folder.path(sid))
            fsync_dir(self.folder.data_dir)
            snapshots = self.trash_dir / f"{sid}.snapshots"
            if snapshots.is_dir():
                ensure_private_dir(self.folder.snapshots_dir)
                with contextlib.suppress(OSError):
                    os.replace(snapshots, self.folder.snapshots_dir / sid)
        except OSError as exc:
            raise StorageError(
                f"cannot restore session {sid}: {os_reason(exc)}",
                hint="check the sessions folder's permissions and free space",
            ) from None
        self.index.refresh(force=True)
        logger.info("restored session %s from the trash", sid)
        return sid

    def empty_trash(self, *, older_than_s: float | None = None) -> list[str]:
        """Delete what the trash holds (only what is older than ``older_than_s``
        when given); returns the ids deleted for good."""
        self.folder.check_open()
        gone: list[str] = []
        now = time.time()
        try:
            names = os.listdir(self.trash_dir)
        except FileNotFoundError:
            return []
        for name in names:
            sid = session_id_of_file(name)
            if sid is None:
                continue
            path = self.trash_dir / name
            try:
                if older_than_s is not None and now - path.stat().st_mtime < older_than_s:
                    continue
                path.unlink()
            except OSError:
                continue
            shutil.rmtree(self.trash_dir / f"{sid}.snapshots", ignore_errors=True)
            gone.append(sid)
        return gone

    def _expire_trash(self) -> list[str]:
        return self.empty_trash(older_than_s=self.folder.settings.trash_days * 86400)

    def import_session(self, session: Session, *, new_id: bool = False) -> str:
        """Store a session from elsewhere (validated in full); returns its id.

        An id that exists already is refused unless ``new_id`` gives it a fresh one.
        """
        self.folder.check_open()
        try:
            checked = Session.model_validate(session.to_dict())
        except ValidationError as exc:
            raise SessionError(
                f"the session to import is invalid: {invalid_reason(exc)}",
                hint="fix the file, or export it again from OLLM",
            ) from None
        sid = new_session_id() if new_id else canonical_id(checked.session_id)
        checked = checked.model_copy(update={"session_id": sid})
        if self.folder.path(sid).exists() or sid in self.sessions:
            raise SessionError(
                f"a session with id {sid} already exists",
                hint="import it with a new id (--new-id), or delete the existing one first",
            )
        state = self.sessions.create(SessionDocument.from_session(checked), hold=False)
        self.index.update(sid, SessionView(state.doc), file_sig(self.folder.path(sid)))
        logger.info("imported session %s", sid)
        return sid
