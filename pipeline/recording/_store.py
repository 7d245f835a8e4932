"""The ChatRecordingService: durable recording of sessions (the spec's ChatRecordingService).

Requirements 1, 2, 9 and 10 of spec 000, the session format of 001 and the
storage, index and manager of 004, as one plain, thread-safe class (the
recording actor wraps it). Its parts:

- ``{dataDir}/{sessionId}.json``: each session as a complete document in the
  spec format, replaced atomically (temp file, fsync, rename, fsync of the
  folder) when it is created, after turn ends (:meth:`save_session`, or
  :meth:`save_session_soon`: turn ends within ``saveDelayMs`` share one
  rewrite) and on close. Files are 0600, folders 0700.
- ``{dataDir}/.journal/``: one append-only log per store. Each
  ``record_*`` call returns once its record is durable there; records of all
  sessions recorded at the same moment share one fsync (group commit, see
  :mod:`ollm_cli.pipeline.recording._journal`). Recording never costs work proportional
  to the session's size. The log of a process that died is folded into its
  sessions by the next store that opens the folder, or the session.
- ``{dataDir}/.locks/{sessionId}.lock``: one writer per session (an OS lock,
  see :mod:`ollm_cli.pipeline.recording._lock`). Listing, viewing, searching and exporting
  take no lock and see the records a live writer has journaled but not saved.
- ``{dataDir}/.index/``: the SQLite/FTS5 index behind listing and search,
  derived from the files (:mod:`ollm_cli.pipeline.recording._index`).

This class is the facade; its jobs beyond recording, reading and saving live
in their own modules and it delegates to them: deleting, the trash,
``maxSessions`` and import in :mod:`._retention`; damaged files, dead
journals, rescue files and the doctor in :mod:`._recovery`; turn-end saves
that wait ``saveDelayMs`` in :mod:`._delayed_saves`. What they all work on
is shared through small classes of :mod:`._sessions` (the folder with its paths
and locks, the open sessions with their load, record and save), never through
this facade, which none of them imports. Redaction and turn ends are
:class:`~ollm_cli.pipeline.recording._recorder.SessionRecorder`'s.

Faults: a file that does not parse is moved aside (``*.corrupt-<timestamp>``),
reported, rebuilt from the journal when the journal holds the whole session,
and never breaks a listing. A failed write (disk full, read-only, permission)
is logged, the record stays in memory and is written at the next attempt; no
exception reaches the chat from ``record_*``/``save_session`` (10.1), and
:meth:`ChatRecordingService.health` says what is pending. A failed read raises a
:class:`~ollm_cli.pipeline.errors.SessionError` that says so; a new session can still be
started (10.2). Session ids typed by users are checked before they become
paths; a unique prefix is accepted, as git accepts one.

Example::

    store = ChatRecordingService(settings.services.session)
    sid = store.create_session("llama3.2:3b", "ollama")
    store.record_message(sid, SessionMessage.user("Hello"))   # durable on return
    store.save_session(sid)                                   # turn end
    store.list_sessions(limit=10)
    store.close()
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.errors import SessionError, SessionNotFoundError
from ollm_cli.pipeline.recording import _stream as session_stream
from ollm_cli.pipeline.recording._checkpoints import (
    RESTORE_TRIGGER,
    ResumePoint,
    messages_digest,
    resume_point,
)
from ollm_cli.pipeline.recording._delayed_saves import DelayedSaves
from ollm_cli.pipeline.recording._document import PARTIAL_KEY, SessionDocument
from ollm_cli.pipeline.recording._fork import Forking, ForkResult
from ollm_cli.pipeline.recording._ids import canonical_id, new_session_id
from ollm_cli.pipeline.recording._index import SessionIndex, SessionView, file_sig
from ollm_cli.pipeline.recording._journal import Change, SessionJournal, entries_for
from ollm_cli.pipeline.recording._recovery import DoctorFinding, Recovery
from ollm_cli.pipeline.recording._retention import Retention, TrashEntry
from ollm_cli.pipeline.recording._sessions import (
    DamagedFiles,
    OpenSession,
    OpenSessions,
    SessionFolder,
    check_tags,
    clean_tags,
    invalid_reason,
)
from ollm_cli.pipeline.recording._sessions._folder import MAX_NOTICES
from ollm_cli.pipeline.recording._stream import StreamedSession
from ollm_cli.pipeline.records import (
    CloseReport,
    CompressionEvent,
    SearchHit,
    Session,
    SessionMessage,
    SessionMetadata,
    SessionSummary,
    SessionToolCall,
    StoreHealth,
    ThinkingPart,
    now_iso,
)
from ollm_cli.pipeline.terminal_text import has_control
from ollm_cli.pipeline.title_text import clean_title, title_from_text

logger = logging.getLogger(__name__)

__all__ = ["MAX_NOTICES", "ChatRecordingService", "StoreHealth", "check_tags"]

CLOSE_RETRY_S = 1.0
"""How often a session whose close could not save its file (a full disk) tries again."""


class ChatRecordingService:
    """Durable, thread-safe storage of sessions in one folder (the ChatRecordingService)."""

    def __init__(
        self,
        settings: SessionSettings,
        *,
        snapshots_dir: Path | None = None,
        read_only: bool = False,
    ) -> None:
        self.settings = settings
        self.data_dir: Path = settings.data_dir
        self.read_only = read_only
        """Listing, viewing, searching, exporting: no session file is moved, folded or
        rewritten (only the derived index under ``.index/`` follows the files)."""
        self._folder = folder = SessionFolder(
            settings, snapshots_dir=snapshots_dir, read_only=read_only
        )
        self.snapshots_dir: Path = folder.snapshots_dir
        self.close_report: CloseReport | None = None
        self._close_later: set[str] = set()
        self._journal = SessionJournal(folder.journal_dir, group_commit_ms=settings.group_commit_ms)
        self._index = SessionIndex(
            self.data_dir, on_corrupt=self._on_corrupt_file, create_folder=not read_only
        )
        damaged = DamagedFiles(folder)
        self._sessions = OpenSessions(folder, self._journal, self._index, damaged)
        self._recovery = Recovery(folder, self._journal, self._index, self._sessions, damaged)
        self._retention = Retention(folder, self._journal, self._index, self._sessions)
        self._forking = Forking(folder, self._sessions)
        self._delayed = DelayedSaves(self._save_if_open)
        if not read_only:
            self._recovery.recover_dead_logs()
            self._recovery.replay_rescues()

    @property
    def notices(self) -> deque[str]:
        """Lines the user should see once (retention, replayed rescue files)."""
        return self._folder.notices

    @property
    def recovery_report(self) -> list[str]:
        """What was repaired since this store opened (``ollm sessions doctor`` lists it)."""
        return self._folder.recovery_report

    @property
    def _open(self) -> dict[str, OpenSession]:
        return self._sessions.states

    def _on_corrupt_file(self, sid: str, path: Path, problem: str) -> None:
        self._recovery.on_corrupt_file(sid, path, problem)

    # -- creating, opening, closing ------------------------------------------------------

    def create_session(
        self,
        model: str,
        provider: str,
        *,
        working_dir: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        session_id: str | None = None,
    ) -> str:
        """Create a session, write its file at once, hold its writer lock; return its id.

        Applies ``maxSessions`` afterwards (never deleting this session or a pinned one).
        """
        self._folder.check_open()
        sid = canonical_id(session_id) if session_id is not None else new_session_id()
        manual_title = clean_title(title) if title else None
        now = now_iso()
        session = Session(
            session_id=sid,
            start_time=now,
            last_activity=now,
            model=model,
            provider=provider,
            metadata=SessionMetadata(
                title=manual_title or None,
                title_source="manual" if manual_title else None,
                working_dir=working_dir,
                tags=check_tags(tags or []),
            ),
        )
        doc = SessionDocument.from_session(session)
        state = self._sessions.create(doc)
        self._sessions.journal_header(state)
        self._index.update(sid, SessionView(doc), file_sig(self._folder.path(sid)))
        if self.settings.max_sessions > 0:
            try:
                self._retention.apply_retention()
            except (SessionError, OSError) as exc:
                logger.warning("could not apply maxSessions after creating a session: %s", exc)
        logger.info("created session %s (%s/%s)", sid, provider, model)
        return sid

    def open_session(self, session_id: str) -> Session:
        """Resume a session: take its writer lock, fold in its journal, return all of it."""
        self._folder.check_open()
        sid = self.resolve_id(session_id)
        with self._sessions.opening:
            state = self._sessions.get(sid)
            if state is None:
                session = self._sessions.open_state(sid)[1]
                assert session is not None
                return session
            self._close_later.discard(sid)  # in use again
        with state.lock:
            return state.doc.to_session()

    def close_session(self, session_id: str) -> None:
        """Save the session one last time and release its writer lock.

        If that save fails the session stays open here (its records are kept
        and written at the next attempt) and the failure shows in :meth:`health`.
        """
        sid = self._sessions.known_id(session_id)
        state = self._sessions.get(sid)
        if state is None:
            return
        self._delayed.cancel(sid)
        if not self._save(state):
            logger.error(
                "session %s stays open until its file can be saved (retried every %.0f s)",
                sid,
                CLOSE_RETRY_S,
            )
            self._close_later.add(sid)
            self._delayed.schedule(sid, CLOSE_RETRY_S)
            return
        self._close_later.discard(sid)
        self._sessions.pop(sid)
        state.file_lock.release()

    def close(self) -> CloseReport:
        """Close every open session and stop the journal's flusher.

        Records the disk refused to the end are written to a rescue file on
        another filesystem (see :mod:`ollm_cli.pipeline.recording._recovery`); the report says
        how many there were and where they went. Closing twice returns the
        first report.
        """
        if self._folder.closed:
            return self.close_report or CloseReport(ok=True)
        self._delayed.close()
        for sid in list(self._sessions.states):
            self.close_session(sid)
        self._folder.closed = True
        journaled = self._journal.close()
        with self._sessions.registry:
            left = list(self._sessions.states.values())
            self._sessions.states.clear()
        for state in left:
            if journaled:
                logger.warning(
                    "session %s could not be saved; its records are in the journal, which the "
                    "next store to open the folder folds in",
                    state.doc.session_id,
                )
            else:
                logger.error(
                    "session %s closed with records that could not be written (see the errors "
                    "above)",
                    state.doc.session_id,
                )
            state.file_lock.release()
        self._index.close()
        self.close_report = self._recovery.rescue_unsaved()
        return self.close_report

    def take_notices(self) -> list[str]:
        """The lines the user should see once (and forget them here)."""
        notices = list(self._folder.notices)
        self._folder.notices.clear()
        return notices

    def __enter__(self) -> ChatRecordingService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recording -------------------------------------------------------------------------

    def record_message(self, session_id: str, message: SessionMessage) -> bool:
        """Append ``message``; durable when this returns True (False: the disk refused
        it; it is kept and retried, see :meth:`health`)."""
        data = message.to_dict()

        def change(state: OpenSession) -> Change:
            out: Change = {"m": data, "la": OpenSessions.activity(state)}
            if message.role == "assistant" and PARTIAL_KEY in state.doc.data:
                out["pa"] = None  # the whole answer replaces the part streamed so far
            meta = state.doc.metadata
            thought = sum(p.tokens or 0 for p in message.parts if isinstance(p, ThinkingPart))
            if thought:  # of completionTokens, those spent on reasoning
                out["md"] = {"thinkingTokens": int(meta.get("thinkingTokens") or 0) + thought}
            if message.role == "user" and meta.get("title") is None:
                title = title_from_text(message.text)
                if title:
                    out["md"] = {"title": title, "titleSource": "auto"}
            return out

        return self._record(session_id, change)

    def record_partial(self, session_id: str, message: SessionMessage) -> bool:
        """Record the part of an answer streamed so far (replacing the previous part).

        It is kept marked ``interrupted`` until :meth:`record_message` records the
        whole answer; a crash before that leaves it as an interrupted answer.
        """
        data = message.to_dict()
        data["interrupted"] = True
        return self._record(
            session_id, lambda state: {"pa": data, "la": OpenSessions.activity(state)}
        )

    def record_tool_call(self, session_id: str, call: SessionToolCall) -> bool:
        """Append a tool call and its result; durable when this returns True."""
        data = call.to_dict()
        return self._record(
            session_id, lambda state: {"t": data, "la": OpenSessions.activity(state)}
        )

    def add_usage(
        self,
        session_id: str,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        durable: bool = True,
    ) -> None:
        """Add a turn's token usage to ``promptTokens``/``completionTokens``.

        ``tokenCount`` follows their sum unless it was set otherwise
        (:meth:`set_token_count`), in which case it is left alone. With
        ``durable=False`` it returns without waiting for its fsync: the next
        durable record of the store (the journal is written in order) covers it.
        """
        if prompt_tokens < 0 or completion_tokens < 0:
            raise SessionError(
                "token usage cannot be negative",
                hint="pass the prompt and completion token counts the model reported",
            )

        def change(state: OpenSession) -> Change:
            meta = state.doc.metadata
            prompt, completion = int(meta["promptTokens"]), int(meta["completionTokens"])
            total = int(meta["tokenCount"])
            fields = {
                "promptTokens": prompt + prompt_tokens,
                "completionTokens": completion + completion_tokens,
            }
            if total == prompt + completion:
                fields["tokenCount"] = fields["promptTokens"] + fields["completionTokens"]
            return {"md": fields}

        self._record(session_id, change, durable=durable)

    def set_token_count(self, session_id: str, token_count: int, *, durable: bool = True) -> None:
        """Set ``metadata.tokenCount`` (e.g. the context size after compression);
        ``durable`` as for :meth:`add_usage`."""
        if token_count < 0:
            raise SessionError("a token count cannot be negative", hint="pass 0 or more")
        self._record(session_id, lambda state: {"md": {"tokenCount": token_count}}, durable=durable)

    def record_compression(self, session_id: str, event: CompressionEvent) -> None:
        """Count one compression and append it to ``metadata.compressionHistory``;
        durable when this returns.

        Its checkpoint gets the fingerprint of the messages it covers as the file
        holds them (see :mod:`ollm_cli.pipeline.recording._checkpoints`); a checkpoint covering more
        messages than the session has is left out. A snapshot restore
        (``trigger: restore``) is kept in the history but not counted.
        """
        data = event.to_dict()
        counted = event.trigger != RESTORE_TRIGGER

        def change(state: OpenSession) -> Change:
            meta = state.doc.metadata
            checkpoint = data.get("checkpoint")
            if isinstance(checkpoint, dict):
                covered = int(checkpoint["coversThrough"])
                messages = state.doc.messages
                if covered <= len(messages):
                    checkpoint["fingerprint"] = messages_digest(messages[:covered])
                else:
                    logger.warning(
                        "session %s: a checkpoint covering %d of its %d messages is not kept",
                        session_id,
                        covered,
                        len(messages),
                    )
                    data["checkpoint"] = None
            return {
                "md": {
                    "compressionCount": int(meta["compressionCount"]) + int(counted),
                    "compressionHistory": [*meta["compressionHistory"], data],
                }
            }

        self._record(session_id, change)

    def open_for_resume(self, session_id: str) -> ResumePoint:
        """Resume a session from its latest checkpoint: as :meth:`open_session`
        (takes the writer lock, folds in the journal), but only the messages the
        active context needs are built (see :func:`._checkpoints.resume_point`).
        A file whose needed parts do not validate goes the way of :meth:`open_session`."""
        self._folder.check_open()
        sid = self.resolve_id(session_id)
        with self._sessions.opening:
            state = self._sessions.get(sid)
            if state is None:
                state = self._sessions.open_state(sid, build=False)[0]
        try:
            with state.lock:
                return resume_point(state.doc.data)
        except ValidationError:
            # open it again the whole way: a damaged file is set aside and rebuilt
            self.close_session(sid)
            self.open_session(sid)
            state = self._sessions.states[sid]
            with state.lock:
                return resume_point(state.doc.data)

    def _record(
        self,
        session_id: str,
        make_change: Callable[[OpenSession], Change],
        *,
        durable: bool = True,
    ) -> bool:
        return self._sessions.record(session_id, make_change, durable=durable)

    # -- saving --------------------------------------------------------------------------

    def save_session(self, session_id: str) -> None:
        """Turn end: bring ``{id}.json`` (and the index) up to date. Never raises on a
        failed write: it is logged, kept and retried (see :meth:`health`)."""
        sid = self._sessions.known_id(session_id)
        state = self._sessions.get(sid)
        if state is None:
            if not self._folder.path(sid).exists():
                raise SessionNotFoundError(
                    f"no session {sid} to save", hint="create or open the session first"
                )
            return
        self._save(state)

    def save_session_soon(self, session_id: str, delay_s: float) -> None:
        """Turn end, without keeping the caller: a background thread brings the
        file up to date in ``delay_s`` seconds (0: at once), one save for every
        turn end until then. Every record is durable in the journal already;
        the file only catches up."""
        sid = self._sessions.known_id(session_id)
        if sid in self._sessions:
            self._delayed.schedule(sid, max(0.0, delay_s))

    def save_pending(self, session_id: str) -> bool:
        """Whether a delayed save (:meth:`save_session_soon`) of the session waits."""
        return self._delayed.is_pending(session_id)

    def _save_if_open(self, sid: str) -> None:
        state = self._sessions.get(sid)
        if state is None:
            return
        if sid in self._close_later:  # its close waits for the disk: try again
            self.close_session(sid)
        else:
            self._save(state)

    def _save(self, state: OpenSession) -> bool:
        return self._sessions.save(state)

    # -- reading ---------------------------------------------------------------------------

    def get_session(self, session_id_or_prefix: str) -> Session:
        """The whole session, read-only, including journaled records not yet in its file.

        Never blocked by a writer in another process.
        """
        sid = self.resolve_id(session_id_or_prefix)
        state = self._sessions.get(sid)
        if state is not None:
            with state.lock:
                return state.doc.to_session()
        doc, _ = self._sessions.load(sid)
        try:
            return doc.to_session()
        except ValidationError as exc:
            return self._sessions.damaged.handle_corrupt(
                sid, self._folder.path(sid), invalid_reason(exc)
            ).to_session()

    def streamed(self, session_id_or_prefix: str) -> StreamedSession | None:
        """The session as a stream (see :mod:`ollm_cli.pipeline.recording._stream`) when its file is
        large, not open here and has no newer journaled records; None otherwise (read
        it with :meth:`get_session`)."""
        sid = self.resolve_id(session_id_or_prefix)
        path = self._folder.path(sid)
        if sid in self._sessions:
            return None
        try:
            if path.stat().st_size < session_stream.STREAM_BYTES:
                return None
            streamed = session_stream.open_streamed(path)
        except (OSError, ValueError):  # not a whole session file: get_session reports it
            return None
        if streamed.header.session_id != sid:
            return None
        if streamed.revision is not None:
            epoch, seq = streamed.revision
            newer = entries_for(self._folder.journal_dir, sid)
            if any(e.epoch == epoch and e.seq > seq for e in newer):
                return None
        return streamed

    def resolve_id(self, session_id_or_prefix: str) -> str:
        """The full id of a session from its id or a unique prefix of it.

        Raises :class:`InvalidSessionIdError` (not an id), :class:`SessionNotFoundError`
        or :class:`AmbiguousSessionIdError` (the prefix matches several sessions).
        """
        return self._sessions.resolve_id(session_id_or_prefix)

    def list_sessions(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        sort: str = "lastActivity",
        descending: bool = True,
        tag: str | None = None,
        model: str | None = None,
        title: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        working_dir: str | None = None,
        min_messages: int = 0,
    ) -> list[SessionSummary]:
        """Summaries of the sessions, from the index (brought up to date first).

        ``sort`` is a camelCase column of SessionSummary; ``title`` matches a part
        of the title (any case); ``since``/``until`` bound ``lastActivity``;
        ``working_dir`` keeps the sessions started in that folder
        (``metadata.workingDir``); ``min_messages`` leaves out the shorter ones
        (1: the empty sessions).
        """
        self._index.refresh()
        return self._index.list_sessions(
            limit=limit,
            offset=offset,
            sort=sort,
            descending=descending,
            tag=tag,
            model=model,
            title=title,
            since=since,
            until=until,
            working_dir=working_dir,
            min_messages=min_messages,
        )

    def count_sessions(self) -> int:
        """How many sessions there are."""
        self._index.refresh()
        return self._index.count()

    def search(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Full-text search over every message, tool call, title, note and tag.

        One hit per session, best first (bm25); each hit's ``snippet`` marks the
        matched words with ``«`` and ``»``. Every word must match; ``word*`` is a
        prefix. FTS syntax in the query is taken literally.
        """
        self._index.refresh()
        return self._index.search(query, limit=limit)

    def reindex(self) -> int:
        """Rebuild the index from the files; returns how many sessions it holds."""
        for state in list(self._sessions.states.values()):
            if state.dirty:
                self._save(state)
        return self._index.rebuild()

    # -- metadata ------------------------------------------------------------------------------

    def update_metadata(self, session_id: str, **fields: Any) -> None:
        """Set metadata fields by their Python names (``title=``, ``title_source=``,
        ``custom=``, ``notes=``...), validated.

        On a session open here the change is journaled (durable on return); on a
        closed one the file is rewritten atomically under the writer lock, taken
        briefly (:class:`SessionLockedError` if another process holds it).
        """
        known = SessionMetadata.model_fields
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise SessionError(
                f"unknown session metadata field(s): {', '.join(unknown)}",
                hint="use the field names of SessionMetadata: " + ", ".join(known),
            )
        aliases = {name: known[name].alias or name for name in fields}

        def change(doc: SessionDocument) -> Change | None:
            merged = {**doc.metadata, **{aliases[k]: v for k, v in fields.items()}}
            try:
                checked = SessionMetadata.model_validate(merged).to_dict()
            except ValidationError as exc:
                raise SessionError(
                    f"invalid session metadata: {invalid_reason(exc)}",
                    hint="check the value's type",
                ) from None
            return {"md": {aliases[k]: checked[aliases[k]] for k in fields}}

        self._change_metadata(session_id, change)

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title by hand; it wins over the automatic one from then on."""
        if has_control(title):
            raise SessionError(
                "a session title cannot hold control characters or escape sequences",
                hint="give plain text; terminals would run escape sequences when listing it",
            )
        cleaned = clean_title(title)
        if not cleaned:
            raise SessionError("a session title cannot be empty", hint="give a few words")
        self.update_metadata(session_id, title=cleaned, title_source="manual")

    def add_tags(self, session_id: str, tags: list[str]) -> None:
        """Add tags (kept once each, in the order first given)."""
        new = check_tags(tags)
        self._change_metadata(
            session_id,
            lambda doc: {"md": {"tags": clean_tags([*doc.metadata["tags"], *new])}},
        )

    def remove_tags(self, session_id: str, tags: list[str]) -> None:
        """Remove tags (absent ones are ignored)."""
        gone = set(clean_tags(tags))
        self._change_metadata(
            session_id,
            lambda doc: {"md": {"tags": [t for t in doc.metadata["tags"] if t not in gone]}},
        )

    def set_pinned(self, session_id: str, pinned: bool) -> None:
        """Pin a session (never deleted by ``maxSessions`` cleanup) or unpin it."""
        self.update_metadata(session_id, pinned=pinned)

    def switch_model(self, session_id: str, change: dict[str, Any]) -> None:
        """A ``/model`` switch: append ``change`` (``from``, ``to``, ``timestamp``,
        ``trigger``, ``kind``) to ``metadata.modeHistory`` and make ``to`` the session's
        ``model``, so that a resume goes on with it."""
        self._change_metadata(
            session_id,
            lambda doc: {
                "md": {"modeHistory": [*(doc.metadata.get("modeHistory") or []), change]},
                "hd": {"model": change["to"]},
            },
        )

    def set_notes(self, session_id: str, notes: str) -> None:
        """Set the user's notes on a session."""
        self.update_metadata(session_id, notes=notes)

    def _change_metadata(
        self, session_id: str, make_change: Callable[[SessionDocument], Change | None]
    ) -> None:
        sid = self.resolve_id(session_id)
        if self.read_only:
            self._folder.check_open()
        if sid in self._sessions:
            self._record(sid, lambda state: make_change(state.doc) or {})
            state = self._sessions.get(sid)
            if state is not None:
                with state.lock:
                    view = SessionView(state.doc)
                self._index.update(sid, view, file_sig(self._folder.path(sid)))
            return
        lock = self._folder.lock(sid)
        try:
            doc, _ = self._sessions.load(sid)
            change = make_change(doc)
            if change:
                doc.apply(change)
                doc.seq += 1
            path = self._folder.path(sid)
            self._folder.write_file(path, doc.encode(), sid)
            self._index.update(sid, SessionView(doc), file_sig(path))
        finally:
            lock.release()

    # -- deleting, retention, the trash, importing (see _retention) ------------------------

    def delete_session(self, session_id: str) -> None:
        """Delete a session: its file, its journal records, its index row, its snapshots."""
        self._retention.delete_session(session_id)

    def trash_session(self, session_id: str) -> None:
        """Move a session to the trash folder (``ollm sessions trash restore`` brings it back)."""
        self._retention.trash_session(session_id)

    def delete_oldest_sessions(
        self, keep: int, *, dry_run: bool = False, trash: bool = False
    ) -> list[str]:
        """Delete the least recently active sessions until ``keep`` remain."""
        return self._retention.delete_oldest_sessions(keep, dry_run=dry_run, trash=trash)

    def apply_retention(self) -> list[str]:
        """Keep at most ``maxSessions`` (the rest to the trash); empty expired trash."""
        return self._retention.apply_retention()

    def list_trash(self) -> list[TrashEntry]:
        """The sessions in the trash, most recently trashed first."""
        return self._retention.list_trash()

    def restore_from_trash(self, session_id_or_prefix: str) -> str:
        """Bring a session back from the trash; returns its id."""
        return self._retention.restore_from_trash(session_id_or_prefix)

    def empty_trash(self, *, older_than_s: float | None = None) -> list[str]:
        """Delete what the trash holds (older than ``older_than_s`` when given)."""
        return self._retention.empty_trash(older_than_s=older_than_s)

    def import_session(self, session: Session, *, new_id: bool = False) -> str:
        """Store a session from elsewhere (validated in full); returns its id."""
        return self._retention.import_session(session, new_id=new_id)

    # -- forks (see _fork) ------------------------------------------------------------------

    def fork_session(
        self, session_id: str, *, at: int | None = None, title: str | None = None
    ) -> ForkResult:
        """A new session holding the first ``at`` messages of another (None: all), with
        ``metadata.forkedFrom``; the original is untouched, even while another
        process writes it."""
        return self._forking.fork(session_id, at=at, title=title)

    def forks_of(self, session_id: str) -> list[str]:
        """The ids of the sessions forked from this one."""
        sid = self.resolve_id(session_id)
        self._index.refresh()
        return self._index.forks_of(sid)

    # -- doctor (see _recovery) ----------------------------------------------------------------

    def doctor(self, *, fix: bool = False) -> list[DoctorFinding]:
        """Check the folder (damaged files, orphaned journals, stale locks, index drift,
        rescue files); with ``fix``, repair them."""
        return self._recovery.doctor(fix=fix)

    # -- health --------------------------------------------------------------------------------

    @property
    def pending_writes(self) -> int:
        """Records kept in memory because the disk refused them (0 when all is durable)."""
        return self._journal.pending

    def health(self) -> StoreHealth:
        """Whether every record is durable; if not, what is pending and why."""
        pending = self._journal.pending
        errors = self._sessions.save_errors
        unsaved = sorted(errors)
        last = self._journal.last_error or next(iter(errors.values()), None)
        return StoreHealth(
            ok=pending == 0 and not unsaved,
            pending_writes=pending,
            unsaved_sessions=unsaved,
            last_error=last,
        )

    @property
    def open_sessions(self) -> list[str]:
        """Ids of the sessions this store holds open (their writer locks are held)."""
        return sorted(self._sessions.states)

    def is_open(self, session_id: str) -> bool:
        """Whether this store holds ``session_id`` open (exact id, no prefix)."""
        return session_id in self._sessions
