"""The sessions a store holds open: loading them, recording into them, saving them.

A session open here has its writer lock held and its whole document in memory;
each change is applied to the document and appended to the journal
(:mod:`ollm_cli.pipeline.recording._journal`), and :meth:`OpenSessions.save`
brings its file up to date. :meth:`OpenSessions.load` reads a session's file
with the journaled changes newer than it folded in, for writers and readers
alike.

Example::

    sessions = OpenSessions(folder, journal, index, damaged)
    state = sessions.open_state(sid)[0]          # takes the lock, folds in the journal
    sessions.record(sid, lambda state: {"la": now_iso()})
    sessions.save(state)
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import ValidationError

from ollm_cli.pipeline.atomic_file import write_atomic
from ollm_cli.pipeline.errors import AmbiguousSessionIdError, SessionError, SessionNotFoundError
from ollm_cli.pipeline.recording._document import PARTIAL_KEY, DocumentError, SessionDocument
from ollm_cli.pipeline.recording._ids import (
    canonical_id,
    check_prefix,
    is_session_id,
    matches_prefix,
    session_id_of_file,
)
from ollm_cli.pipeline.recording._index import SessionIndex, SessionView, file_sig
from ollm_cli.pipeline.recording._journal import (
    Change,
    JournalEntry,
    SessionJournal,
    encode_change,
    entries_for,
)
from ollm_cli.pipeline.recording._lock import SessionLock
from ollm_cli.pipeline.recording._sessions._damaged import DamagedFiles
from ollm_cli.pipeline.recording._sessions._folder import SessionFolder
from ollm_cli.pipeline.recording._sessions._reasons import invalid_reason, os_reason
from ollm_cli.pipeline.recording._sessions._replay import replay
from ollm_cli.pipeline.records import Session, parse_iso

logger = logging.getLogger(__name__)

_READ_ATTEMPTS = 5
_AMBIGUOUS_SHOWN = 5


class OpenSession:
    """A session this store writes: its document, its locks and what is saved."""

    __slots__ = ("doc", "file_lock", "lock", "save_lock", "saved_seq")

    def __init__(self, doc: SessionDocument, file_lock: SessionLock, saved_seq: int) -> None:
        self.doc = doc
        self.file_lock = file_lock
        self.lock = threading.Lock()
        self.save_lock = threading.Lock()
        self.saved_seq = saved_seq

    @property
    def dirty(self) -> bool:
        return self.doc.seq != self.saved_seq


class OpenSessions:
    """The registry of the sessions open in one folder, with their load, record and save.

    ``registry`` guards the mapping; ``opening`` is held while a session is
    opened or leaves the folder, so two threads never take its lock twice.
    ``save_errors`` holds, per session, why its last save failed.
    """

    def __init__(
        self,
        folder: SessionFolder,
        journal: SessionJournal,
        index: SessionIndex,
        damaged: DamagedFiles,
    ) -> None:
        self.folder = folder
        self.journal = journal
        self.index = index
        self.damaged = damaged
        self.states: dict[str, OpenSession] = {}
        self.registry = threading.Lock()
        self.opening = threading.Lock()
        self.save_errors: dict[str, str] = {}

    def get(self, sid: str) -> OpenSession | None:
        """The open state of ``sid`` (exact id), None if it is not open here."""
        return self.states.get(sid)

    def __contains__(self, sid: object) -> bool:
        return sid in self.states

    def add(self, state: OpenSession) -> None:
        with self.registry:
            self.states[state.doc.session_id] = state

    def pop(self, sid: str) -> OpenSession | None:
        """Take ``sid`` out of the registry (its lock is the caller's to release)."""
        with self.registry:
            return self.states.pop(sid, None)

    # -- opening -----------------------------------------------------------------------

    def create(self, doc: SessionDocument, *, hold: bool = True) -> OpenSession:
        """Write a new session's file under its writer lock; with ``hold`` keep it open
        here, else release the lock (the file is complete as written)."""
        sid = doc.session_id
        path = self.folder.path(sid)
        if path.exists() or sid in self.states:
            raise SessionError(
                f"a session with id {sid} already exists",
                hint="leave the id out to get a new one",
            )
        lock = self.folder.lock(sid)
        try:
            if path.exists():
                raise SessionError(
                    f"a session with id {sid} already exists",
                    hint="leave the id out to get a new one",
                )
            self.folder.write_file(path, doc.encode(), sid)
        except BaseException:
            lock.release()
            raise
        state = OpenSession(doc, lock, doc.seq)
        if hold:
            self.add(state)
        else:
            lock.release()
        return state

    def open_state(self, sid: str, *, build: bool = True) -> tuple[OpenSession, Session | None]:
        """Take the lock, load and check the whole session, and hold it open
        (``build=False``: the models are left to the caller, nothing checked)."""
        lock = self.folder.lock(sid)
        try:
            doc, file_seq = self.load(sid)
            try:
                session = doc.to_session() if build else None
            except ValidationError as exc:
                path = self.folder.path(sid)
                doc = self.damaged.handle_corrupt(sid, path, invalid_reason(exc))
                file_seq = -1
                session = doc.to_session()
        except BaseException:
            lock.release()
            raise
        state = OpenSession(doc, lock, file_seq)
        self.add(state)
        self.journal.mark_saved(sid, doc.epoch, file_seq)
        partial = doc.data.get(PARTIAL_KEY)
        if isinstance(partial, dict):  # its writer died mid-answer: keep it as interrupted
            self.record(sid, lambda _state: {"m": partial, "pa": None})
            with state.lock:
                session = doc.to_session()
        if state.dirty:
            self.save(state)
        return state, session

    def writable(self, session_id: str) -> OpenSession:
        """The open state of ``session_id``, opening it (taking its lock) if needed."""
        self.folder.check_open()
        sid = canonical_id(session_id)
        with self.opening:
            state = self.states.get(sid)
            if state is None:
                if not self.folder.path(sid).exists():
                    raise SessionNotFoundError(
                        f"no session {sid} to record into",
                        hint="create the session first (create_session)",
                    )
                state = self.open_state(sid)[0]
        return state

    # -- recording ---------------------------------------------------------------------

    def record(
        self,
        session_id: str,
        make_change: Callable[[OpenSession], Change],
        *,
        durable: bool = True,
    ) -> bool:
        """Apply and journal one change; True once it is durable (False: the disk
        refused it, it is kept and retried)."""
        state = self.states.get(session_id) or self.writable(session_id)
        with state.lock:
            change = make_change(state)
            doc = state.doc
            seq = doc.seq + 1
            payload = encode_change(change)
            doc.apply(change)
            doc.seq = seq
            ticket = self.journal.submit(JournalEntry(doc.session_id, doc.epoch, seq, payload))
        if durable:
            return self.journal.wait(ticket)
        return True

    def journal_header(self, state: OpenSession) -> None:
        """Journal a new session's header (seq 0: what a rebuild starts from), durably."""
        doc = state.doc
        header = {k: v for k, v in doc.data.items() if k not in ("messages", "toolCalls")}
        with state.lock:
            ticket = self.journal.submit(
                JournalEntry(doc.session_id, doc.epoch, 0, encode_change({"n": header}))
            )
        self.journal.wait(ticket)
        self.journal.mark_saved(doc.session_id, doc.epoch, 0)

    @staticmethod
    def activity(state: OpenSession) -> str:
        """Now, or the previous lastActivity if the clock went back: it never decreases."""
        now = datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"  # as now_iso()
        last = str(state.doc.data["lastActivity"])
        if len(last) == len(now) and last.endswith("Z"):
            return now if now >= last else last
        try:
            return now if parse_iso(now) >= parse_iso(last) else last
        except ValueError:  # pragma: no cover - decode() checked the timestamp
            return now

    # -- saving ------------------------------------------------------------------------

    def save(self, state: OpenSession) -> bool:
        """Bring the session's file (and index row) up to date; False if the write failed
        (logged, kept in ``save_errors``, retried at the next save)."""
        sid = state.doc.session_id
        with state.save_lock:
            with state.lock:
                if not state.dirty and sid not in self.save_errors:
                    return True
                raw = state.doc.encode()
                epoch, seq = state.doc.epoch, state.doc.seq
                view = SessionView(state.doc)
            path = self.folder.path(sid)
            try:
                write_atomic(path, raw)
            except OSError as exc:
                reason = os_reason(exc)
                self.save_errors[sid] = (
                    f"cannot save session {sid} in {self.folder.data_dir}: {reason}"
                )
                logger.error(
                    "cannot save session %s (%s); its records are kept and saved at the next "
                    "attempt",
                    sid,
                    reason,
                )
                return False
            with state.lock:
                state.saved_seq = max(state.saved_seq, seq)
            if self.save_errors.pop(sid, None) is not None:
                logger.warning("session %s is saved again", sid)
            self.journal.mark_saved(sid, epoch, seq)
            self.index.update(sid, view, file_sig(path))
            return True

    # -- reading -----------------------------------------------------------------------

    def load(self, sid: str) -> tuple[SessionDocument, int]:
        """The session's file with every journaled record newer than it folded in.

        Returns the document and the seq its file holds. A file that does not
        parse is moved aside and rebuilt from the journal if possible.
        """
        path = self.folder.path(sid)
        doc: SessionDocument | None = None
        for _ in range(_READ_ATTEMPTS):
            try:
                with open(path, "rb") as handle:
                    before = os.fstat(handle.fileno())
                    raw = handle.read()
            except FileNotFoundError:
                raise SessionNotFoundError(
                    f"no session {sid}", hint="`ollm sessions list` shows the sessions there are"
                ) from None
            except OSError as exc:
                raise SessionError(
                    f"cannot read session {sid}: {os_reason(exc)}",
                    hint="check the file's permissions; you can start a new session meanwhile",
                ) from None
            try:
                doc = SessionDocument.decode(raw, sid)
            except DocumentError as exc:
                return self.damaged.handle_corrupt(sid, path, str(exc)), -1
            entries = entries_for(self.folder.journal_dir, sid)
            after = file_sig(path)
            if after == (before.st_size, before.st_mtime_ns, before.st_ino):
                break
        assert doc is not None
        file_seq = doc.seq
        replay(doc, entries)
        return doc, file_seq

    def resolve_id(self, session_id_or_prefix: str) -> str:
        """The full id of a session from its id or a unique prefix of it.

        Raises :class:`InvalidSessionIdError` (not an id), :class:`SessionNotFoundError`
        or :class:`AmbiguousSessionIdError` (the prefix matches several sessions).
        """
        text = check_prefix(session_id_or_prefix)
        if is_session_id(text):
            if text in self.states or self.folder.path(text).exists():
                return text
            raise SessionNotFoundError(
                f"no session {text}", hint="`ollm sessions list` shows the sessions there are"
            )
        try:
            names = os.listdir(self.folder.data_dir)
        except OSError:
            names = []
        found = sorted(
            {
                sid
                for sid in (session_id_of_file(n) for n in names)
                if sid is not None and matches_prefix(sid, text)
            }
            | {sid for sid in self.states if matches_prefix(sid, text)}
        )
        if not found:
            raise SessionNotFoundError(
                f"no session id starts with {text!r}",
                hint="`ollm sessions list` shows the sessions there are",
            )
        if len(found) > 1:
            shown = ", ".join(found[:_AMBIGUOUS_SHOWN]) + (
                ", ..." if len(found) > _AMBIGUOUS_SHOWN else ""
            )
            raise AmbiguousSessionIdError(
                f"{text!r} matches {len(found)} sessions: {shown}",
                hint="type more characters of the id",
            )
        return found[0]

    def known_id(self, session_id: str) -> str:
        """``session_id`` if it is open here (exact), else checked as an id."""
        if session_id in self.states:
            return session_id
        return canonical_id(session_id)
