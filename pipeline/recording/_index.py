"""The session index: SQLite (with FTS5) for listing and searching sessions fast.

The session files stay the source of truth; this index is derived from them
and can always be thrown away (``ollm sessions reindex`` rebuilds it). It lives
in ``{dataDir}/.index/sessions.sqlite`` and holds one row per session (the
columns of :class:`~ollm_cli.pipeline.records.SessionSummary`, plus the size, mtime
and inode of the file it was read from) and one FTS5 row per message, per
tool call and per session's title/notes/tags.

Staleness is found cheaply. Every session file is replaced by a rename, which
changes the folder's mtime; when the folder's mtime is what the index last saw
(and old enough not to hide a change made in the same clock tick), nothing
changed and no file is even stat'ed. Otherwise one ``scandir`` compares each
file's size, mtime and inode with the row and re-reads only the files that
differ. A file that does not parse is reported through ``on_corrupt`` and left
out of the index; it never breaks a listing.

Search is bounded whatever the files hold. The index keeps the first
:data:`SEARCHED_CHARS` characters of each message's and tool call's text (a
60 MB message once made every search take a minute and a gigabyte), and a file
of :data:`~ollm_cli.pipeline.recording._stream.STREAM_BYTES` or more is read as a
stream whose strings are cut short (:class:`IndexedStream`), never whole.

Search results carry a ``snippet`` whose matched words are wrapped in
:data:`MARK_START` and :data:`MARK_END` (``«`` and ``»``), for the CLI to
highlight; the snippet is cut with ``…``. It is taken from the best window of
:data:`SNIPPET_WINDOW` characters of the text that matched (FTS5's ``snippet()``
over a whole long text takes time that grows with the square of its matches).

Example::

    index = SessionIndex(folder)
    index.refresh()
    index.list_sessions(limit=20, tag="work")
    index.search("dockerfile cache", limit=5)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording._document import (
    DocumentError,
    SessionDocument,
    construct,
    gc_paused,
)
from ollm_cli.pipeline.recording._ids import session_id_of_file
from ollm_cli.pipeline.recording._stream import STREAM_BYTES, IndexedStream
from ollm_cli.pipeline.records import MARK_END, MARK_START, SearchHit, SessionSummary, parse_iso

logger = logging.getLogger(__name__)

SNIPPET_ELLIPSIS = "…"
SCHEMA_VERSION = "5"
SEARCHED_CHARS = 1 << 20
"""How much of the text of each message and tool call search looks at (characters)."""
SNIPPET_WINDOW = 2000
"""The characters of text a snippet is chosen in (windows overlap by a tenth)."""
_TOKENIZE = "tokenize='unicode61 remove_diacritics 2'"
INDEX_DIR = ".index"
INDEX_FILE = "sessions.sqlite"
RACY_NS = 500_000_000
SORT_COLUMNS: dict[str, str] = {
    "sessionId": "session_id",
    "title": "title COLLATE NOCASE",
    "startTime": "start_us",
    "lastActivity": "last_activity_us",
    "messageCount": "message_count",
    "toolCallCount": "tool_call_count",
    "tokenCount": "token_count",
    "model": "model",
    "provider": "provider",
}

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
    session_id TEXT PRIMARY KEY,
    start_time TEXT NOT NULL,
    start_us INTEGER NOT NULL,
    last_activity TEXT NOT NULL,
    last_activity_us INTEGER NOT NULL,
    model TEXT NOT NULL,
    provider TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    tool_call_count INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    title TEXT,
    tags TEXT NOT NULL,
    pinned INTEGER NOT NULL,
    file_size INTEGER NOT NULL,
    file_mtime_ns INTEGER NOT NULL,
    file_ino INTEGER NOT NULL,
    indexed_messages INTEGER NOT NULL,
    indexed_tools INTEGER NOT NULL,
    forked_from TEXT,
    working_dir TEXT
);
CREATE INDEX IF NOT EXISTS sessions_recent ON sessions(
    last_activity_us, session_id, start_time, last_activity, model, provider, message_count,
    tool_call_count, token_count, title, tags, pinned
);
CREATE TABLE IF NOT EXISTS tags(
    session_id TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY(session_id, tag)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tags_tag ON tags(tag);
CREATE TABLE IF NOT EXISTS items(
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    idx INTEGER NOT NULL,
    role TEXT
);
CREATE INDEX IF NOT EXISTS items_session ON items(session_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, {_TOKENIZE});
"""
_WINDOWS = f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.windows USING fts5(text, {_TOKENIZE})"

FileSig = tuple[int, int, int]


class SessionView:
    """What the index needs of a session: its data lists, read without copying.

    ``messages`` and ``tool_calls`` may be the live, append-only lists of an
    open session: only the first ``message_count`` / ``tool_call_count`` items
    are read.
    """

    __slots__ = ("data", "message_count", "messages", "tool_call_count", "tool_calls")

    def __init__(self, doc: SessionDocument) -> None:
        header = {k: v for k, v in doc.data.items() if k not in ("messages", "toolCalls")}
        header["metadata"] = dict(doc.metadata)
        self.data = header
        self.messages = doc.messages
        self.tool_calls = doc.tool_calls
        self.message_count = len(doc.messages)
        self.tool_call_count = len(doc.tool_calls)


class SessionIndex:
    """The derived SQLite index of one sessions folder (thread-safe)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        on_corrupt: Callable[[str, Path, str], None] | None = None,
        create_folder: bool = True,
    ) -> None:
        """``create_folder=False`` (a reader): a sessions folder that does not exist is
        not created for the index; the index of no sessions is kept in memory."""
        self.data_dir = data_dir
        self.path = data_dir / INDEX_DIR / INDEX_FILE
        self._on_corrupt = on_corrupt
        self._lock = threading.RLock()
        self.in_memory = False
        if not create_folder and not data_dir.is_dir():
            self.in_memory = True
            self._conn = self._open(":memory:")
        else:
            self._conn = self._connect()

    # -- opening -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            ensure_private_dir(self.path.parent)
            conn = self._open(str(self.path))
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                logger.warning("session index %s is damaged (%s); rebuilding it", self.path, exc)
                self._remove_files()
                with contextlib.suppress(OSError, sqlite3.Error):
                    return self._open(str(self.path))
            logger.warning(
                "session index %s cannot be used (%s); keeping it in memory for now",
                self.path,
                exc,
            )
            self.in_memory = True
            return self._open(":memory:")
        return conn

    def _open(self, where: str) -> sqlite3.Connection:
        conn = sqlite3.connect(where, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            if where != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                with contextlib.suppress(OSError):
                    os.chmod(where, 0o600)
            version = None
            with contextlib.suppress(sqlite3.OperationalError):
                row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                version = row[0] if row else None
            if version not in (None, SCHEMA_VERSION):
                for table in ("meta", "sessions", "tags", "items", "fts"):
                    conn.execute(f"DROP TABLE IF EXISTS {table}")
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES('schema', ?)", (SCHEMA_VERSION,)
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def _remove_files(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(str(self.path) + suffix).unlink()

    def _fall_back(self, exc: sqlite3.Error) -> None:
        """The on-disk index failed: continue with a fresh in-memory one."""
        logger.warning("session index %s failed (%s); rebuilding it in memory", self.path, exc)
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self.in_memory = True
        self._conn = self._open(":memory:")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    # -- keeping it up to date -----------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Bring the index up to date with the files (cheap when nothing changed)."""
        with self._lock:
            try:
                self._refresh(force)
            except sqlite3.Error as exc:
                self._fall_back(exc)
                self._refresh(True)

    def _refresh(self, force: bool) -> None:
        try:
            dir_stat = os.stat(self.data_dir)
        except FileNotFoundError:
            dir_stat = None
        dir_sig = f"{dir_stat.st_ino}:{dir_stat.st_mtime_ns}" if dir_stat else "missing"
        conn = self._conn
        if not force:
            row = conn.execute("SELECT value FROM meta WHERE key='dir'").fetchone()
            if row is not None and row[0] == dir_sig:
                return
        files = self._scan() if dir_stat else {}
        known = {
            sid: (size, mtime, ino)
            for sid, size, mtime, ino in conn.execute(
                "SELECT session_id, file_size, file_mtime_ns, file_ino FROM sessions"
            )
        }
        changed = [sid for sid, sig in files.items() if known.get(sid) != sig]
        removed = [sid for sid in known if sid not in files]
        if changed or removed:
            self._apply_changes(changed, removed, files)
        trusted = dir_stat is not None and time.time_ns() - dir_stat.st_mtime_ns > RACY_NS
        conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES('dir', ?)",
            (dir_sig if trusted else "racy",),
        )

    def drift(self) -> tuple[list[str], list[str]]:
        """How the index differs from the files: (sessions whose file is new or
        changed since it was indexed, sessions indexed whose file is gone)."""
        with self._lock:
            files = self._scan() if self.data_dir.is_dir() else {}
            known = {
                sid: (size, mtime, ino)
                for sid, size, mtime, ino in self._conn.execute(
                    "SELECT session_id, file_size, file_mtime_ns, file_ino FROM sessions"
                )
            }
        changed = sorted(sid for sid, sig in files.items() if known.get(sid) != sig)
        removed = sorted(sid for sid in known if sid not in files)
        return changed, removed

    def _scan(self) -> dict[str, FileSig]:
        files: dict[str, FileSig] = {}
        with os.scandir(self.data_dir) as entries:
            for entry in entries:
                sid = session_id_of_file(entry.name)
                if sid is None:
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # a FIFO or device named like a session is never opened
                files[sid] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return files

    def _apply_changes(
        self, changed: list[str], removed: list[str], files: dict[str, FileSig]
    ) -> None:
        conn = self._conn
        batch: list[tuple[str, SessionView, FileSig]] = []
        for position, sid in enumerate(changed):
            path = self.data_dir / f"{sid}.json"
            if files[sid][0] >= STREAM_BYTES:
                self._write_streamed(sid, path, removed)
                continue
            try:
                with open(path, "rb") as handle:
                    st = os.fstat(handle.fileno())
                    raw = handle.read()
                sig = (st.st_size, st.st_mtime_ns, st.st_ino)
                doc = SessionDocument.decode(raw, sid)
            except FileNotFoundError:
                removed.append(sid)
                continue
            except OSError as exc:
                logger.warning("session index: cannot read %s (%s); skipped", path.name, exc)
                continue
            except DocumentError as exc:
                removed.append(sid)
                if self._on_corrupt is not None:
                    self._on_corrupt(sid, path, str(exc))
                continue
            batch.append((sid, SessionView(doc), sig))
            if len(batch) >= 200 or position == len(changed) - 1:
                self._write_views(batch)
                batch = []
        if batch:
            self._write_views(batch)
        if removed:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sid in removed:
                    self._delete_rows(sid)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _write_streamed(self, sid: str, path: Path, removed: list[str]) -> None:
        """Index a large file as it streams by (see :class:`IndexedStream`): its items
        first, then its row once its header is known to be a session's."""
        conn = self._conn
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                stream = IndexedStream(handle, SEARCHED_CHARS)
                conn.execute("BEGIN IMMEDIATE")
                try:
                    self._delete_rows(sid)
                    self._insert_items(sid, _stream_items(stream))
                    doc = SessionDocument.from_data(
                        {**stream.header, "messages": [], "toolCalls": []}, sid
                    )
                    self._insert_row(
                        sid,
                        doc.data,
                        stream.message_count,
                        stream.tool_call_count,
                        (st.st_size, st.st_mtime_ns, st.st_ino),
                    )
                    self._insert_items(sid, [_about(doc.data)])
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        except FileNotFoundError:
            removed.append(sid)
        except OSError as exc:
            logger.warning("session index: cannot read %s (%s); skipped", path.name, exc)
        except DocumentError as exc:
            removed.append(sid)
            if self._on_corrupt is not None:
                self._on_corrupt(sid, path, str(exc))

    def _write_views(self, batch: Sequence[tuple[str, SessionView, FileSig]]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sid, view, sig in batch:
                self._delete_rows(sid)
                self._insert(sid, view, sig, 0, 0)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def update(self, session_id: str, view: SessionView, sig: FileSig | None) -> None:
        """Record a session this process just saved (only its new items are indexed).

        ``sig`` is the (size, mtime_ns, inode) of the file as saved, or None when
        the file could not be written (the row then shows the newer state and is
        read again from the file at the next refresh).
        """
        with self._lock:
            try:
                self._update(session_id, view, sig)
            except sqlite3.Error as exc:
                self._fall_back(exc)
                self._refresh(True)

    def _update(self, session_id: str, view: SessionView, sig: FileSig | None) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT indexed_messages, indexed_tools FROM sessions WHERE session_id=?",
                (session_id,),
            ).fetchone()
            start_messages, start_tools = row if row else (0, 0)
            if start_messages > view.message_count or start_tools > view.tool_call_count:
                start_messages = start_tools = 0
                self._delete_rows(session_id)
            else:
                self._delete_row(session_id)
            self._insert(session_id, view, sig or (-1, -1, -1), start_messages, start_tools)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def remove(self, session_id: str) -> None:
        """Forget a deleted session."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._delete_rows(session_id)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                self._fall_back(exc)

    def rebuild(self) -> int:
        """Throw the index away and read every file again; returns the session count."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                for table in ("sessions", "tags", "items", "fts", "meta"):
                    conn.execute(f"DELETE FROM {table}")
                conn.execute("INSERT INTO meta(key, value) VALUES('schema', ?)", (SCHEMA_VERSION,))
                conn.execute("COMMIT")
                self._refresh(True)
            except sqlite3.Error as exc:
                self._fall_back(exc)
                self._refresh(True)
            return self._count()

    def _delete_row(self, sid: str) -> None:
        conn = self._conn
        conn.execute("DELETE FROM sessions WHERE session_id=?", (sid,))
        conn.execute("DELETE FROM tags WHERE session_id=?", (sid,))
        ids = conn.execute(
            "SELECT id FROM items WHERE session_id=? AND kind='metadata'", (sid,)
        ).fetchall()
        conn.executemany("DELETE FROM fts WHERE rowid=?", ids)
        conn.execute("DELETE FROM items WHERE session_id=? AND kind='metadata'", (sid,))

    def _delete_rows(self, sid: str) -> None:
        conn = self._conn
        conn.execute("DELETE FROM sessions WHERE session_id=?", (sid,))
        conn.execute("DELETE FROM tags WHERE session_id=?", (sid,))
        conn.execute(
            "DELETE FROM fts WHERE rowid IN (SELECT id FROM items WHERE session_id=?)", (sid,)
        )
        conn.execute("DELETE FROM items WHERE session_id=?", (sid,))

    def _insert(
        self, sid: str, view: SessionView, sig: FileSig, start_messages: int, start_tools: int
    ) -> None:
        self._insert_row(sid, view.data, view.message_count, view.tool_call_count, sig)
        items: list[tuple[str, int, str | None, str]] = []
        for i in range(start_messages, view.message_count):
            message = view.messages[i]
            role = message.get("role")
            items.append(
                ("message", i, role if isinstance(role, str) else None, message_text(message))
            )
        for i in range(start_tools, view.tool_call_count):
            items.append(("toolCall", i, None, tool_call_text(view.tool_calls[i])))
        items.append(_about(view.data))
        self._insert_items(sid, items)

    def _insert_row(
        self,
        sid: str,
        data: dict[str, Any],
        message_count: int,
        tool_call_count: int,
        sig: FileSig,
    ) -> None:
        """The session's row and its tags (its items are inserted apart)."""
        conn = self._conn
        meta = data.get("metadata") or {}
        tags = [t for t in meta.get("tags") or [] if isinstance(t, str)]
        title = meta.get("title") if isinstance(meta.get("title"), str) else None
        conn.execute(
            "INSERT INTO sessions VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                sid,
                data["startTime"],
                _micros(data["startTime"]),
                data["lastActivity"],
                _micros(data["lastActivity"]),
                data["model"],
                data["provider"],
                message_count,
                tool_call_count,
                _int(meta.get("tokenCount")),
                title,
                orjson.dumps(tags).decode(),
                1 if meta.get("pinned") is True else 0,
                sig[0],
                sig[1],
                sig[2],
                message_count,
                tool_call_count,
                _forked_from(meta),
                _str(meta.get("workingDir")) or None,
            ),
        )
        conn.executemany("INSERT OR IGNORE INTO tags VALUES(?, ?)", [(sid, t) for t in tags])

    def _insert_items(self, sid: str, items: Iterable[tuple[str, int, str | None, str]]) -> None:
        conn = self._conn
        for kind, idx, role, text in items:
            if not text.strip():
                continue
            cursor = conn.execute(
                "INSERT INTO items(session_id, kind, idx, role) VALUES(?,?,?,?)",
                (sid, kind, idx, role),
            )
            conn.execute("INSERT INTO fts(rowid, text) VALUES(?, ?)", (cursor.lastrowid, text))

    # -- queries -------------------------------------------------------------------------

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
        """Summaries of the indexed sessions, filtered, sorted and paged."""
        column = SORT_COLUMNS.get(sort)
        if column is None:
            raise SessionError(
                f"cannot sort sessions by {sort!r}",
                hint="sort by one of: " + ", ".join(SORT_COLUMNS),
            )
        if offset < 0 or (limit is not None and limit < 0):
            raise SessionError(
                "limit and offset of a session listing cannot be negative",
                hint="give a limit of 1 or more and an offset of 0 or more",
            )
        where, args = _listing_filters(
            tag=tag,
            model=model,
            title=title,
            since=since,
            until=until,
            working_dir=working_dir,
            min_messages=min_messages,
        )
        order = "DESC" if descending else "ASC"
        sql = (
            "SELECT session_id, start_time, last_activity, model, provider, message_count,"
            " tool_call_count, token_count, title, tags, pinned, forked_from FROM sessions"
            + (" WHERE " + " AND ".join(where) if where else "")
            + f" ORDER BY {column} {order}, session_id {order} LIMIT ? OFFSET ?"
        )
        args.extend([-1 if limit is None else limit, offset])
        with gc_paused():
            with self._lock:
                rows = self._conn.execute(sql, args).fetchall()
            return _summaries(rows)

    def count(self) -> int:
        """How many sessions are indexed."""
        with self._lock:
            return self._count()

    def _count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM sessions").fetchone()
        return int(row[0])

    def forks_of(self, sid: str) -> list[str]:
        """The sessions forked from ``sid`` (``metadata.forkedFrom``), oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id FROM sessions WHERE forked_from=? ORDER BY start_us, session_id",
                (sid,),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def oldest_first(self) -> list[tuple[str, bool]]:
        """Every session as (id, pinned), least recently active first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT session_id, pinned FROM sessions ORDER BY last_activity_us, session_id"
            ).fetchall()
        return [(sid, bool(pinned)) for sid, pinned in rows]

    def search(self, query: str, *, limit: int = 20) -> list[SearchHit]:
        """The sessions best matching ``query`` (all its words), best first, one hit each."""
        match, any_word = fts_query(query), fts_query(query, every=False)
        if match is None or any_word is None:
            raise SessionError(
                "the search has no words to look for",
                hint="give one or more words, e.g. `ollm sessions search docker cache`",
            )
        if limit < 1:
            return []
        hits: list[SearchHit] = []
        with self._lock:
            conn = self._conn
            wanted = limit * 4
            seen: set[str] = set()
            while True:
                rows = conn.execute(
                    "SELECT fts.rowid, fts.rank, items.session_id, items.kind, items.idx,"
                    " items.role FROM fts JOIN items ON items.id = fts.rowid"
                    " WHERE fts MATCH ? ORDER BY fts.rank LIMIT ?",
                    (match, wanted),
                ).fetchall()
                chosen = []
                seen.clear()
                for rowid, rank, sid, kind, idx, role in rows:
                    if sid not in seen:
                        seen.add(sid)
                        chosen.append((rowid, rank, sid, kind, idx, role))
                if len(chosen) >= limit or len(rows) < wanted:
                    break
                wanted *= 4
            for rowid, rank, sid, kind, idx, role in chosen[:limit]:
                snippet = self._snippet(rowid, match, any_word)
                info = conn.execute(
                    "SELECT title, last_activity, model FROM sessions WHERE session_id=?", (sid,)
                ).fetchone() or (None, "", "")
                hits.append(
                    SearchHit(
                        session_id=sid,
                        title=info[0],
                        snippet=snippet,
                        score=-float(rank),
                        where=kind,
                        role=role,
                        index=idx,
                        last_activity=info[1],
                        model=info[2],
                    )
                )
        return hits

    def _snippet(self, rowid: int, match: str, any_word: str) -> str:
        """The snippet of the text of ``rowid`` for ``match``, its matched words marked,
        ``…`` where it is cut. FTS5's ``snippet()`` only ever reads one window of
        :data:`SNIPPET_WINDOW` characters: a text that short is its own window, read in
        the index; a longer one is cut into windows in a table of this connection, and
        the best window for ``match`` (or, when none holds every word, for any of them)
        gives the snippet."""
        conn = self._conn
        row = conn.execute(
            "SELECT length(text) <= ? FROM fts WHERE rowid=?", (SNIPPET_WINDOW, rowid)
        ).fetchone()
        if row is None or row[0]:
            found = conn.execute(
                "SELECT snippet(fts, 0, ?, ?, ?, 16) FROM fts WHERE fts MATCH ? AND rowid=?",
                (MARK_START, MARK_END, SNIPPET_ELLIPSIS, match, rowid),
            ).fetchone()
            return str(found[0]) if found else ""
        (text,) = conn.execute("SELECT text FROM fts WHERE rowid=?", (rowid,)).fetchone()
        windows = _windows(text)
        conn.execute(_WINDOWS)  # a table of this connection alone, in memory
        try:
            conn.execute("BEGIN")  # one transaction: FTS5 writes its index once
            conn.executemany(
                "INSERT INTO temp.windows(rowid, text) VALUES(?, ?)",
                ((n, text[start:end]) for n, (start, end) in enumerate(windows)),
            )
            conn.execute("COMMIT")
            for query in (match, any_word):
                best = conn.execute(
                    "SELECT rowid FROM temp.windows WHERE windows MATCH ? ORDER BY rank LIMIT 1",
                    (query,),
                ).fetchone()
                if best is not None:
                    break
            else:
                end = min(len(text), 200)
                return text[:end] + (SNIPPET_ELLIPSIS if end < len(text) else "")
            (snippet,) = conn.execute(
                "SELECT snippet(windows, 0, ?, ?, ?, 16) FROM temp.windows"
                " WHERE windows MATCH ? AND rowid=?",
                (MARK_START, MARK_END, SNIPPET_ELLIPSIS, query, best[0]),
            ).fetchone()
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("DROP TABLE temp.windows")  # dropped at once, not row by row
        start, end = windows[best[0]]
        if start > 0 and not snippet.startswith(SNIPPET_ELLIPSIS):
            snippet = SNIPPET_ELLIPSIS + snippet
        if end < len(text) and not snippet.endswith(SNIPPET_ELLIPSIS):
            snippet += SNIPPET_ELLIPSIS
        return str(snippet)


def _windows(text: str) -> list[tuple[int, int]]:
    """The (start, end) of the windows of :data:`SNIPPET_WINDOW` characters a snippet of
    ``text`` is chosen in; each overlaps the next by a tenth, so that a phrase cut by one
    is whole in the next.

    >>> _windows("x" * 4500)
    [(0, 2000), (1800, 3800), (3600, 4500)]
    >>> _windows("short")
    [(0, 5)]
    """
    step = SNIPPET_WINDOW - SNIPPET_WINDOW // 10
    starts = range(0, max(1, len(text) - SNIPPET_WINDOW // 10), step)
    return [(start, min(len(text), start + SNIPPET_WINDOW)) for start in starts]


_QUERY_PARTS = re.compile(r'"([^"]*)"?|(\S+)')


def fts_query(text: str, *, every: bool = True) -> str | None:
    """An FTS5 query matching every word of ``text`` (each quoted, so no syntax leaks in;
    ``every=False``: any of them).

    A word also matches the words it begins (``kube`` finds ``kubernetes``), a whole
    word ranking first; text in double quotes is a phrase, its words in that order
    and whole (``"docker compose"``).

    >>> fts_query('kube "docker compose"')
    '("kube" OR "kube"*) AND "docker compose"'
    >>> fts_query('kube "docker compose"', every=False)
    '("kube" OR "kube"*) OR "docker compose"'
    >>> fts_query("dock* --")
    '"dock"*'
    """
    terms = []
    for match in _QUERY_PARTS.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if phrase is not None:
            words = [w for w in phrase.split() if any(ch.isalnum() for ch in w)]
            if words:
                terms.append(_quoted(" ".join(words)))
            continue
        core = word.rstrip("*")
        if not any(ch.isalnum() for ch in core):
            continue
        if word.endswith("*"):
            terms.append(_quoted(core) + "*")
        else:
            terms.append(f"({_quoted(core)} OR {_quoted(core)}*)")
    return (" AND " if every else " OR ").join(terms) if terms else None


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def message_text(message: dict[str, Any], limit: int = SEARCHED_CHARS) -> str:
    """The searchable text of a message (file data): text, tool calls and results, its
    first ``limit`` characters (the pieces after them are not even looked at)."""
    out = _Pieces(limit)
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else []:
        if out.full:
            break
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            out.add(_str(part.get("text")))
        elif kind == "tool_call":
            out.add(_str(part.get("name")))
            out.add(_json(part.get("args")))
        elif kind == "tool_result":
            out.add(_str(part.get("name")))
            out.add(_str(part.get("content")))
    return out.text()


def tool_call_text(call: dict[str, Any], limit: int = SEARCHED_CHARS) -> str:
    """The searchable text of a tool call (file data): name, arguments and result, its
    first ``limit`` characters."""
    result = call.get("result")
    result = result if isinstance(result, dict) else {}
    out = _Pieces(limit)
    out.add(_str(call.get("name")))
    out.add(_json(call.get("args")))
    for piece in (result.get("llmContent"), result.get("returnDisplay"), call.get("error")):
        out.add(_str(piece))
    return out.text()


class _Pieces:
    """Text pieces joined by newlines, up to a number of characters."""

    __slots__ = ("left", "limit", "pieces")

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit
        self.pieces: list[str] = []

    @property
    def full(self) -> bool:
        return self.left <= 0

    def add(self, piece: str) -> None:
        if piece and not self.full:
            self.pieces.append(piece[: self.left])
            self.left -= len(piece) + 1

    def text(self) -> str:
        return "\n".join(self.pieces)[: self.limit]


def _about(data: dict[str, Any]) -> tuple[str, int, str | None, str]:
    """The searchable item of a session's title, notes and tags."""
    meta = data.get("metadata") or {}
    tags = [t for t in meta.get("tags") or [] if isinstance(t, str)]
    about = " ".join([_str(meta.get("title")), _str(meta.get("notes")), " ".join(tags)])
    return "metadata", 0, None, about[:SEARCHED_CHARS]


def _stream_items(stream: IndexedStream) -> Iterator[tuple[str, int, str | None, str]]:
    """The searchable items of a session file read as a stream."""
    for kind, index, item in stream.items():
        if kind == "message":
            role = item.get("role")
            yield kind, index, role if isinstance(role, str) else None, message_text(item)
        else:
            yield kind, index, None, tool_call_text(item)


def _forked_from(meta: dict[str, Any]) -> str | None:
    """The parent's id of a fork (``metadata.forkedFrom.sessionId``), None otherwise."""
    origin = meta.get("forkedFrom")
    parent = origin.get("sessionId") if isinstance(origin, dict) else None
    return parent if isinstance(parent, str) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json(value: Any) -> str:
    if not value:
        return ""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # pragma: no cover - file data always serializes
        return ""


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _micros(value: str) -> int:
    return _micros_of(parse_iso(value))  # checked by SessionDocument.decode


def _micros_of(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def file_sig(path: Path) -> FileSig | None:
    """(size, mtime_ns, inode) of ``path``, or None if it is gone."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _listing_filters(
    *,
    tag: str | None,
    model: str | None,
    title: str | None,
    since: datetime | None,
    until: datetime | None,
    working_dir: str | None,
    min_messages: int,
) -> tuple[list[str], list[Any]]:
    """The WHERE conditions of a session listing and their arguments, in order."""
    where: list[str] = []
    args: list[Any] = []
    if tag is not None:
        where.append("session_id IN (SELECT session_id FROM tags WHERE tag=?)")
        args.append(tag)
    if model is not None:
        where.append("model=?")
        args.append(model)
    if title is not None:
        where.append("title LIKE ? ESCAPE '\\'")
        args.append("%" + _like_escape(title) + "%")
    if since is not None:
        where.append("last_activity_us>=?")
        args.append(_micros_of(since))
    if until is not None:
        where.append("last_activity_us<=?")
        args.append(_micros_of(until))
    if working_dir is not None:
        where.append("working_dir=?")
        args.append(working_dir)
    if min_messages > 0:
        where.append("message_count>=?")
        args.append(min_messages)
    return where, args


def _summaries(rows: list[Any]) -> list[SessionSummary]:
    """The summaries of listed rows, built without validation (the index wrote them);
    a tags column seen before is parsed once."""
    tags: dict[str, list[str]] = {}
    summaries = []
    for r in rows:
        parsed = tags.get(r[9])
        if parsed is None:
            parsed = tags[r[9]] = orjson.loads(r[9])
        summaries.append(
            construct(
                SessionSummary,
                {
                    "session_id": r[0],
                    "start_time": r[1],
                    "last_activity": r[2],
                    "model": r[3],
                    "provider": r[4],
                    "message_count": r[5],
                    "tool_call_count": r[6],
                    "token_count": r[7],
                    "title": r[8],
                    "tags": list(parsed),
                    "pinned": bool(r[10]),
                    "forked_from": r[11],
                },
            )
        )
    return summaries
