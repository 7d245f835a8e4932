"""The records of a session's workspace checkpoints, and the log that keeps them.

Every tool call that changed files adds one :class:`FileChange` per file (or
folder) it changed: the path relative to the workspace, the state before and the
state after. A state names its content by digest in the
:class:`~ollm_cli.pipeline.checkpoints._blobs.BlobStore`; a content that could
not be kept (larger than ``maxFileMb``, beyond ``maxMb``) is ``unkept`` with the
reason, and a rewind names that file instead of restoring it.

A call names at most ``checkpoints.maxPathsPerCall`` paths, and fewer once the
log reaches ``maxMb``; the others it changed are counted in one
:class:`UnrecordedPaths` line (how many, the folder holding them all, why), and a
rewind past the call says so.

The log is ``changes.jsonl`` in the session's checkpoint folder: one JSON object
per line (orjson, the camelCase names below), appended and fsynced after each
tool call; a torn last line (a crash mid-append) is skipped when read. A line
with ``unrecorded`` is an :class:`UnrecordedPaths`, any other a
:class:`FileChange`.

Example lines::

    {"toolCallId":"c1","workspace":"/home/me/proj","path":"src/a.py",
     "before":{"kind":"file","digest":"9f86...","mode":420,"size":12},
     "after":{"kind":"file","digest":"60303a...","mode":420,"size":14},
     "timestamp":"2026-11-26T14:40:53.120Z"}
    {"toolCallId":"c2","workspace":"/home/me/proj","path":"build","unrecorded":19000,
     "reason":"more than checkpoints.maxPathsPerCall (1000) in one call",
     "timestamp":"2026-11-26T14:41:02.004Z"}
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import orjson
from pydantic import Field, ValidationError

from ollm_cli.pipeline.records import Record, Timestamp, now_iso

logger = logging.getLogger(__name__)

LOG_FILE = "changes.jsonl"

StateKind = Literal["absent", "file", "symlink", "dir", "unkept"]


class FileState(Record):
    """What a path was at one moment: absent, a file (content by digest), a symlink,
    a folder, or a file whose content was not kept (``reason`` says why)."""

    kind: StateKind
    digest: str | None = None
    mode: int | None = None
    size: int | None = None
    target: str | None = None
    reason: str | None = None

    def same_as(self, other: FileState) -> bool:
        """Whether two states are the same file content (modes and sizes aside)."""
        if self.kind != other.kind:
            return False
        if self.kind == "file":
            return self.digest == other.digest
        if self.kind == "symlink":
            return self.target == other.target
        return True


ABSENT = FileState(kind="absent")


class FileChange(Record):
    """One path a tool call changed, with its state before and after."""

    tool_call_id: str
    workspace: str
    path: str
    before: FileState
    after: FileState
    timestamp: Timestamp = Field(default_factory=now_iso)


class UnrecordedPaths(Record):
    """The paths one tool call changed beyond those its log lines name: how many, the
    folder holding them all (``.``: the workspace), and why they were not named."""

    tool_call_id: str
    workspace: str
    path: str
    unrecorded: int
    reason: str
    timestamp: Timestamp = Field(default_factory=now_iso)


LogEntry = FileChange | UnrecordedPaths
"""One line of the log."""


def common_folder(paths: list[str]) -> str:
    """The deepest path that is, or holds, every one of ``paths``, itself one of them or
    not (``.``: the workspace); for a single path, its folder."""
    if len(paths) > 1:
        return os.path.commonpath(paths) or "."
    return (os.path.dirname(paths[0]) if paths else "") or "."


class ChangeLog:
    """The append-only ``changes.jsonl`` of one session's checkpoints."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOG_FILE

    @staticmethod
    def line(entry: LogEntry) -> bytes:
        """``entry`` as one line of the log."""
        return orjson.dumps(entry.to_dict()) + b"\n"

    def append(self, entries: list[LogEntry]) -> None:
        """Add ``entries`` durably (one write, one fsync)."""
        if not entries:
            return
        data = b"".join(self.line(e) for e in entries)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def size(self) -> int:
        """The log's length in bytes (0: none yet), to read what is added after it."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def read(self, since: int = 0) -> list[LogEntry]:
        """Every line, oldest first (a damaged line is skipped with a warning);
        ``since``: only those appended after the log had that :meth:`size`."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(since)
                raw = handle.read()
        except FileNotFoundError:
            return []
        entries: list[LogEntry] = []
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = orjson.loads(line)
                if isinstance(data, dict) and "unrecorded" in data:
                    entries.append(UnrecordedPaths.model_validate(data))
                else:
                    entries.append(FileChange.model_validate(data))
            except (orjson.JSONDecodeError, ValidationError):
                logger.warning("checkpoint log %s: line %d is damaged, skipped", self.path, number)
        return entries

    def remove(self) -> None:
        """Forget every change (the folder's owner deletes the blobs)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def changed_note(entries: Sequence[LogEntry], *, shown: int = 3) -> str:
    """The line views and the chat show beside a turn for its log lines: ``changed:
    a.py, b/c.txt (+2 more)``, by name; a folder is left out when a path inside it is
    listed, and the paths a call did not name count in the more."""
    unique = sorted({e.path for e in entries if isinstance(e, FileChange)})
    holding = {p.rsplit("/", depth)[0] for p in unique for depth in range(1, p.count("/") + 1)}
    listed = [p for p in unique if p not in holding]
    unnamed = sum(e.unrecorded for e in entries if isinstance(e, UnrecordedPaths))
    if not listed:
        return f"changed: {unnamed:,} path(s), not recorded"
    more = max(0, len(listed) - shown) + unnamed
    return "changed: " + ", ".join(listed[:shown]) + (f" (+{more:,} more)" if more else "")
