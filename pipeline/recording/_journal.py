"""The session journal: one append-only log per store, made durable by group commit.

Every change to an open session (a message, a tool call, a metadata change) is
appended to the log of the store that holds the session, as one self-checking
frame, before the call that made it returns. Many sessions share the log, so
one ``fdatasync`` makes a whole batch of their records durable at once: that is
the group commit. The session files (``{id}.json``) are brought up to date at
turn end and on close; the log only has to hold what is newer than them.

Frame layout (little endian)::

    magic "OJ" | payload length u32 | crc32 u32 | session id (16 bytes)
    | epoch u64 | seq u64 | payload

The crc covers everything after itself, so a torn or damaged frame is detected
and, with everything after it, dropped (and reported). ``epoch`` identifies one
incarnation of a session file and ``seq`` orders its changes: a reader applies
the frames whose ``seq`` is above the one saved in the file, so replaying a log
twice changes nothing.

Payload: one JSON object (written by orjson), a :class:`Change` whose short
keys each name one part of the session that changed; a frame holds the keys
that changed and nothing else::

    {"m": {message}, "la": "2026-01-02T03:04:05.678901Z"}
    {"t": {tool call}, "la": "..."}
    {"md": {"title": "Fix the build", "titleSource": "auto"}}
    {"pa": {message streamed so far}}  |  {"m": {whole message}, "pa": null}
    {"n": {the new session's header}}          (seq 0 only)

A log is locked (``flock``) by its writer for as long as the store lives, so
another store can tell a live log (readers still use it) from the log of a
process that died (its frames are folded into their sessions, then it is
deleted). A log is rotated when it grows and deleted once every session with
frames in it has been saved past them.

Example::

    journal = SessionJournal(folder / ".journal", group_commit_ms=2.0)
    ticket = journal.submit(JournalEntry(session_id, epoch, 7, payload))
    durable = journal.wait(ticket)        # False after a failed write: kept, retried
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, cast

import orjson

from ollm_cli.config.paths import ensure_private_dir
from ollm_cli.pipeline.atomic_file import fsync_dir

logger = logging.getLogger(__name__)

MAGIC = b"OJ"
HEADER = struct.Struct("<2sII16sQQ")
LOG_SUFFIX = ".wal"
ROTATE_BYTES = 16 * 1024 * 1024
RESET_BYTES = 1024 * 1024
_RETRY_FIRST_S = 0.2
_RETRY_MAX_S = 5.0


class JournalEntry(NamedTuple):
    """One change of one session: its id, file incarnation, sequence number and payload."""

    session_id: str
    epoch: int
    seq: int
    payload: bytes


class Change(TypedDict, total=False):
    """The payload of one frame: what changed in one session (on disk as a JSON object).

    Every key is optional; the short names are the on-disk format, so they stay.

    - ``m``: a message appended to ``messages`` (the spec's message object).
    - ``t``: a tool call appended to ``toolCalls``.
    - ``la``: the new ``lastActivity`` (ISO 8601, UTC).
    - ``md``: ``metadata`` fields set to new values (camelCase keys).
    - ``hd``: top-level fields of the session set to new values.
    - ``pa``: the answer streamed so far, marked interrupted; ``None`` drops it
      (the whole answer is recorded by the same frame's ``m``).
    - ``n``: the whole header of a new session (everything but ``messages`` and
      ``toolCalls``); only in the frame of seq 0, which a rebuild starts from.
    """

    m: dict[str, Any]
    t: dict[str, Any]
    la: str
    md: dict[str, Any]
    hd: dict[str, Any]
    pa: dict[str, Any] | None
    n: dict[str, Any]


def encode_change(change: Change) -> bytes:
    """The payload bytes of ``change``."""
    return orjson.dumps(change)


def decode_change(payload: bytes) -> Change:
    """A frame's payload read back (:class:`orjson.JSONDecodeError` if it is not JSON)."""
    return cast(Change, orjson.loads(payload))


@functools.lru_cache(maxsize=4096)
def _id_bytes(session_id: str) -> bytes:
    return uuid.UUID(session_id).bytes


def encode_frame(entry: JournalEntry) -> bytes:
    """The bytes of ``entry`` as one self-checking frame."""
    body = HEADER.pack(
        MAGIC, len(entry.payload), 0, _id_bytes(entry.session_id), entry.epoch, entry.seq
    )
    crc = zlib.crc32(entry.payload, zlib.crc32(body[10:]))
    return body[:6] + struct.pack("<I", crc) + body[10:] + entry.payload


@dataclass
class LogScan:
    """What a log holds: its valid entries, what was damaged in it, and what was torn.

    ``damaged`` lists ``(offset, length)`` of each stretch in the middle of the
    log that failed its checksum (or is no frame at all) and was skipped: the
    intact frames after it are in ``entries``. ``torn_bytes`` counts the bytes
    of an incomplete frame at the very end (a write cut short by a crash).
    """

    entries: list[JournalEntry]
    valid_bytes: int
    torn_bytes: int
    damaged: list[tuple[int, int]] = field(default_factory=list)

    @property
    def damaged_bytes(self) -> int:
        """How many bytes in the middle of the log were skipped as damaged."""
        return sum(length for _, length in self.damaged)


def _frame_at(data: bytes, offset: int) -> tuple[int, bool] | None:
    """The end of the frame at ``offset`` and whether its checksum holds; None when
    no complete frame header with a plausible length starts there."""
    if offset + HEADER.size > len(data):
        return None
    magic, length, crc, _sid, _epoch, _seq = HEADER.unpack_from(data, offset)
    end = offset + HEADER.size + length
    if magic != MAGIC or end > len(data):
        return None
    return end, zlib.crc32(data[offset + 10 : end]) == crc


def _next_intact(data: bytes, start: int) -> int | None:
    """The offset of the next frame at or after ``start`` whose checksum holds."""
    offset = data.find(MAGIC, start)
    while offset >= 0:
        found = _frame_at(data, offset)
        if found is not None and found[1]:
            return offset
        offset = data.find(MAGIC, offset + 1)
    return None


def scan_frames(data: bytes, only: str | None = None) -> LogScan:
    """Decode the frames of ``data``; a damaged frame is skipped and the intact
    frames after it are still read.

    A frame whose checksum fails, or bytes that are no frame, are a damaged
    stretch when an intact frame follows them (its records are lost, the
    later ones are not), and a torn end when nothing intact follows. With
    ``only``, entries of other sessions are skipped (still checked).
    """
    wanted = uuid.UUID(only).bytes if only else None
    entries: list[JournalEntry] = []
    damaged: list[tuple[int, int]] = []
    offset = 0
    valid = 0
    size = len(data)
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    header_size = HEADER.size
    while offset < size:
        if offset + header_size <= size:
            magic, length, crc, sid, epoch, seq = unpack(data, offset)
            end = offset + header_size + length
            if magic == MAGIC and end <= size and crc32(data[offset + 10 : end]) == crc:
                if wanted is None or sid == wanted:
                    entries.append(
                        JournalEntry(
                            str(uuid.UUID(bytes=sid)), epoch, seq, data[offset + header_size : end]
                        )
                    )
                offset = valid = end
                continue
        resume = _next_intact(data, offset + 1)
        if resume is None:
            break
        damaged.append((offset, resume - offset))
        offset = resume
    return LogScan(entries, valid, size - valid, damaged)


def describe_damage(name: str, scan: LogScan) -> list[str]:
    """One line per fault of the log ``name``: damaged records skipped, a torn end."""
    lines = []
    for offset, length in scan.damaged:
        lines.append(
            f"journal {name}: {length} bytes at offset {offset} failed their checksum "
            "(a damaged record, not an incomplete one); skipped, and the intact records "
            "after them were recovered"
        )
    if scan.torn_bytes:
        lines.append(
            f"journal {name}: dropped {scan.torn_bytes} bytes of an incomplete record at its "
            "end (written when its process stopped)"
        )
    return lines


def read_log(path: Path, only: str | None = None) -> LogScan:
    """Read and decode the log at ``path`` (empty if it vanished)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogScan([], 0, 0)
    return scan_frames(data, only)


def log_files(directory: Path) -> list[Path]:
    """The logs in ``directory``, oldest name first."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(LOG_SUFFIX))
    except FileNotFoundError:
        return []
    return [directory / n for n in names]


def entries_for(directory: Path, session_id: str) -> list[JournalEntry]:
    """Every entry of ``session_id`` in every log of ``directory`` (live or dead)."""
    found: list[JournalEntry] = []
    for path in log_files(directory):
        found.extend(read_log(path, session_id).entries)
    return found


@dataclass
class DeadLog:
    """The log of a store that is gone, locked by us while its entries are folded in."""

    path: Path
    scan: LogScan
    _fd: int

    def discard(self) -> None:
        """Delete the log: every entry in it is now in its session file."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self.release()

    def release(self) -> None:
        """Unlock the log and leave it for a later store."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def claim_dead_logs(directory: Path) -> Iterator[DeadLog]:
    """Lock and yield each log whose writer is gone (a live writer keeps its log locked)."""
    for path in log_files(directory):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        except OSError as exc:  # pragma: no cover - a log we could open but not read
            logger.error("cannot read journal %s: %s", path.name, exc.strerror)
            os.close(fd)
            continue
        yield DeadLog(path, scan_frames(data), fd)


class Ticket:
    """What :meth:`SessionJournal.submit` returns: :meth:`SessionJournal.wait` blocks on it.

    Each ticket has its own lock, released when its batch was attempted, so a
    finished batch wakes only the writers whose records it held.
    """

    __slots__ = ("_released", "_waiting", "durable", "number")

    def __init__(self, number: int) -> None:
        self.number = number
        self.durable = False
        self._released = False
        self._waiting = threading.Lock()
        self._waiting.acquire()

    def _resolve(self, durable: bool) -> None:
        """Called by the flusher alone: the batch holding this ticket was attempted."""
        if durable:
            self.durable = True
        if not self._released:
            self._released = True
            self._waiting.release()

    def wait(self) -> bool:
        """Block until the batch was attempted; True when the record is durable."""
        if not self._released:
            with self._waiting:
                pass
        return self.durable


@dataclass
class _Log:
    """A log file this journal writes (current) or wrote (retired)."""

    path: Path
    fd: int
    size: int = 0
    sessions: dict[str, tuple[int, int]] = field(default_factory=dict)


class SessionJournal:
    """The write side: a background flusher makes submitted entries durable in batches.

    ``submit`` only queues (call it while holding the session's own lock, so
    the log keeps each session's order); ``wait`` blocks until the batch
    holding the ticket was written and fsynced, or until that write failed. A
    failed batch is kept in memory and written again at the next attempt (the
    next submit, or a timer), so nothing is lost while the process lives.
    """

    def __init__(
        self,
        directory: Path,
        *,
        group_commit_ms: float = 0.0,
        rotate_bytes: int = ROTATE_BYTES,
        reset_bytes: int = RESET_BYTES,
    ) -> None:
        self.directory = directory
        self._gather_s = group_commit_ms / 1000.0
        self._rotate_bytes = rotate_bytes
        self._reset_bytes = reset_bytes
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._queue: list[tuple[Ticket, JournalEntry]] = []
        self._queued_sessions: set[str] = set()  # the sessions of the queued entries
        self._retry: list[tuple[Ticket, JournalEntry]] = []
        self._retrying = 0  # entries of _retry the flusher is trying again right now
        self._retry_at = 0.0
        self._retry_delay = _RETRY_FIRST_S
        self._next_ticket = 0
        self._resolved = 0
        self._durable = 0
        self._last_writers = 0
        self._attempts = 0
        self._current: _Log | None = None
        self._retired: list[_Log] = []
        self._saved: dict[str, tuple[int, int]] = {}
        self._rotate_next = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self.batches = 0

    # -- the write path -------------------------------------------------------------

    def submit(self, entry: JournalEntry) -> Ticket:
        """Queue ``entry`` for the next batch and return its ticket for :meth:`wait`."""
        with self._lock:
            if self._closing:
                raise RuntimeError("the session journal is closed")
            self._next_ticket += 1
            ticket = Ticket(self._next_ticket)
            self._queue.append((ticket, entry))
            self._queued_sessions.add(entry.session_id)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="ollm-session-journal", daemon=True
                )
                self._thread.start()
            self._work.notify()
            return ticket

    @staticmethod
    def wait(ticket: Ticket) -> bool:
        """Block until ``ticket``'s batch was attempted; True when it is durable."""
        return ticket.wait()

    def owns(self, path: Path) -> bool:
        """Whether ``path`` is a log this journal writes or wrote."""
        with self._lock:
            logs = [*self._retired, *([self._current] if self._current else [])]
        return any(log.path == path for log in logs)

    def unsaved(self) -> list[JournalEntry]:
        """The entries not durable yet (a write failed), oldest first; after
        :meth:`close`, those that could never be written."""
        with self._lock:
            return [entry for _, entry in (*self._retry, *self._queue)]

    @property
    def pending(self) -> int:
        """How many submitted entries are not durable yet because a write failed
        (those being tried again count until the try succeeds)."""
        with self._lock:
            return len(self._retry) + self._retrying

    def flush(self) -> bool:
        """Wait for everything submitted so far; True when all of it is durable."""
        with self._lock:
            if not self._queue and not self._retry and not self._retrying:
                return True
            if self._closing or self._thread is None:
                return False
            ticket = self._next_ticket
            start = self._attempts
            self._retry_at = 0.0
            self._work.notify()
            while self._resolved < ticket or self._attempts == start:
                self._done.wait()
            return self._durable >= ticket

    # -- bookkeeping of what the session files already hold ------------------------

    def mark_saved(self, session_id: str, epoch: int, seq: int) -> None:
        """Record that ``session_id``'s file now holds everything up to ``seq``."""
        with self._lock:
            self._saved[session_id] = (epoch, seq)
            self._drop_saved_logs()
            current = self._current
            if (
                current is not None
                and current.size >= self._reset_bytes
                and self._all_saved(current)
            ):
                self._rotate_next = True

    def forget(self, session_id: str) -> None:
        """``session_id`` was deleted: its entries need not be kept any more."""
        self.mark_saved(session_id, -1, -1)

    def _covered(self, session_id: str, epoch: int, seq: int) -> bool:
        saved = self._saved.get(session_id)
        if saved is None:
            return False
        return saved == (-1, -1) or (saved[0] == epoch and saved[1] >= seq)

    def _all_saved(self, log: _Log) -> bool:
        return all(self._covered(sid, e, s) for sid, (e, s) in log.sessions.items())

    def _drop_saved_logs(self) -> None:
        keep = []
        for log in self._retired:
            if self._all_saved(log):
                _delete_log(log)
            else:
                keep.append(log)
        self._retired = keep

    def _forget_saved_sessions(self, writing: set[str]) -> None:
        """Forget what was saved of sessions that no log, queue or batch in flight
        holds any more (called under the lock when a log is retired).

        Without this the map grows by one entry per session for as long as the
        store is open, and the service's store is open for days. A session
        forgotten here has nothing journaled; its next entries need a later
        :meth:`mark_saved` to be covered, as they would anyway.
        """
        live = set(writing) | self._queued_sessions
        live.update(entry.session_id for _, entry in self._retry)
        for log in (*self._retired, *([self._current] if self._current else [])):
            live.update(log.sessions)
        if len(live) < len(self._saved):
            self._saved = {sid: saved for sid, saved in self._saved.items() if sid in live}

    @property
    def tracked_sessions(self) -> int:
        """How many sessions' saved state the journal keeps (bounded by its logs)."""
        with self._lock:
            return len(self._saved)

    # -- the flusher thread ----------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._retry_due() and not self._closing:
                    timeout = None
                    if self._retry:
                        timeout = max(0.0, self._retry_at - time.monotonic())
                    self._work.wait(timeout)
                if self._closing and not self._queue and not self._retry:
                    return
                self._gather()
                batch = self._retry + self._queue
                self._retrying = len(self._retry)
                self._retry, self._queue = [], []
                self._queued_sessions.clear()
                rotate, self._rotate_next = self._rotate_next, False
                closing = self._closing
            ok = self._write(batch, rotate)
            with self._lock:
                top = batch[-1][0].number
                self._resolved = max(self._resolved, top)
                self._last_writers = len({entry.session_id for _, entry in batch})
                self._attempts += 1
                self._retrying = 0
                if ok:
                    self._durable = top
                    self._retry_delay = _RETRY_FIRST_S
                    self.batches += 1
                else:
                    self._retry = batch + self._retry
                    self._retry_at = time.monotonic() + self._retry_delay
                    self._retry_delay = min(self._retry_delay * 2, _RETRY_MAX_S)
                self._done.notify_all()
            for ticket, _ in batch:
                ticket._resolve(ok)
            if closing and not ok:
                with self._lock:
                    if not self._queue:
                        return

    def _retry_due(self) -> bool:
        return bool(self._retry) and time.monotonic() >= self._retry_at

    def _gather(self) -> None:
        """Wait up to ``group_commit_ms`` for more entries when others are writing too.

        "Others" are other sessions: one conversation records one thing at a time
        (a second entry of the same session, such as usage riding with an answer,
        is no sign that anybody else is about to write), so a lone conversation
        never waits here.
        """
        if self._gather_s <= 0 or self._last_writers <= 1 or self._closing:
            return
        deadline = time.monotonic() + self._gather_s
        while not self._closing:
            if len(self._queued_sessions) >= self._last_writers:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._work.wait(remaining)

    def _write(self, batch: list[tuple[Ticket, JournalEntry]], rotate: bool) -> bool:
        data = b"".join(encode_frame(entry) for _, entry in batch)
        try:
            log = self._log_for_write(rotate, {entry.session_id for _, entry in batch})
        except OSError as exc:
            self._failed("create the journal", exc, len(batch))
            return False
        with self._lock:
            for _, entry in batch:
                known = log.sessions.get(entry.session_id)
                if known is None or known[0] != entry.epoch or known[1] < entry.seq:
                    log.sessions[entry.session_id] = (entry.epoch, entry.seq)
        try:
            view = memoryview(data)
            offset = log.size
            while view:
                written = os.pwrite(log.fd, view, offset)
                view = view[written:]
                offset += written
            os.fdatasync(log.fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(log.fd, log.size)
            self._failed("write the journal", exc, len(batch))
            return False
        log.size += len(data)
        if self.last_error is not None:
            logger.warning(
                "session journal: writing works again; %d record(s) caught up", len(batch)
            )
        self.last_error = None
        return True

    def _failed(self, action: str, exc: OSError, count: int) -> None:
        reason = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        self.last_error = f"cannot {action} in {self.directory}: {exc.strerror or reason}"
        logger.error(
            "session journal: cannot %s (%s); %d record(s) kept in memory and retried",
            action,
            reason,
            count,
        )

    def _log_for_write(self, rotate: bool, writing: set[str]) -> _Log:
        current = self._current
        if current is not None and (rotate or current.size >= self._rotate_bytes):
            with self._lock:
                self._retired.append(current)
                self._current = None
                self._drop_saved_logs()
                self._forget_saved_sessions(writing)
            current = None
        if current is None:
            current = self._create_log()
            with self._lock:
                self._current = current
        return current

    def _create_log(self) -> _Log:
        ensure_private_dir(self.directory)
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}{LOG_SUFFIX}"
        temp = self.directory / f".{name}.tmp"
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(temp, self.directory / name)
            fsync_dir(self.directory)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return _Log(self.directory / name, fd)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> bool:
        """Write what is queued, stop the flusher, delete fully saved logs.

        A log still holding unsaved entries is left (unlocked) for the next
        store to fold in. Returns False if queued entries could not be written.
        """
        with self._lock:
            self._closing = True
            self._work.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        with self._lock:
            lost = len(self._retry) + len(self._queue)
            logs = [*self._retired, *([self._current] if self._current else [])]
            self._retired, self._current = [], None
            for log in logs:
                if self._all_saved(log):
                    _delete_log(log)
                else:
                    os.close(log.fd)
        if lost:
            logger.error("session journal: %d record(s) could not be written before closing", lost)
        return lost == 0


def _delete_log(log: _Log) -> None:
    with contextlib.suppress(OSError):
        log.path.unlink()
    os.close(log.fd)
