"""The records of a session's workspace checkpoints, and the log that keeps them.

Every tool call that changed files adds one :class:`FileChange` per file (or
folder) it changed: the path relative to the workspace, the state before and the
state after. A state names its content by digest in the
:class:`~ollm_cli.pipeline.checkpoints._blobs.BlobStore`; a content that could
not be kept (larger than ``maxFileMb``, beyond ``maxMb``) is ``unkept`` with the
reason, and a rewind names that file instead of restoring it.

The log is ``changes.jsonl`` in the session's checkpoint folder: one JSON object
per line (orjson, the camelCase names below), appended and fsynced after each
tool call; a torn last line (a crash mid-append) is skipped when read.

Example line::

    {"toolCallId":"c1","workspace":"/home/me/proj","path":"src/a.py",
     "before":{"kind":"file","digest":"9f86...","mode":420,"size":12},
     "after":{"kind":"file","digest":"60303a...","mode":420,"size":14},
     "timestamp":"2026-11-26T14:40:53.120Z"}
"""

from __future__ import annotations

import contextlib
import logging
import os
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


class ChangeLog:
    """The append-only ``changes.jsonl`` of one session's checkpoints."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOG_FILE

    def append(self, changes: list[FileChange]) -> None:
        """Add ``changes`` durably (one write, one fsync)."""
        if not changes:
            return
        data = b"".join(orjson.dumps(c.to_dict()) + b"\n" for c in changes)
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

    def read(self, since: int = 0) -> list[FileChange]:
        """Every change, oldest first (a damaged line is skipped with a warning);
        ``since``: only those appended after the log had that :meth:`size`."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(since)
                raw = handle.read()
        except FileNotFoundError:
            return []
        changes: list[FileChange] = []
        for number, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                changes.append(FileChange.model_validate(orjson.loads(line)))
            except (orjson.JSONDecodeError, ValidationError):
                logger.warning("checkpoint log %s: line %d is damaged, skipped", self.path, number)
        return changes

    def remove(self) -> None:
        """Forget every change (the folder's owner deletes the blobs)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def changed_note(paths: list[str], *, shown: int = 3) -> str:
    """The line views and the chat show beside a turn: ``changed: a.py, b/c.txt (+2
    more)``; a folder is left out when a path inside it is listed."""
    unique = list(dict.fromkeys(paths))
    listed = [p for p in unique if not any(q.startswith(p + "/") for q in unique)]
    more = len(listed) - shown
    return "changed: " + ", ".join(listed[:shown]) + (f" (+{more} more)" if more > 0 else "")
