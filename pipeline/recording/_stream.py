"""Reading a large session file in bounded memory, message by message.

``ollm sessions view`` and ``export`` of a session file of hundreds of
megabytes must not build the whole session (a 200 MB file became 1.7 GB of
objects). A file larger than :data:`STREAM_BYTES` is read instead with an
incremental JSON parser (ijson, its C backend), in three passes that each hold
one item at a time:

1. the outline: the top-level fields, the ids of tool calls and of tool
   results, and how many messages and tool calls there are;
2. the metadata and the recorded tool calls, kept small (a recorded result is
   kept only for a call whose result no message holds);
3. the messages, one at a time, for :func:`ollm_cli.pipeline.recording._export.iter_transcript`.

A file whose journal holds records newer than it (a live writer) is read whole
instead, as are small files.

The session index reads a large file in one pass too (:class:`IndexedStream`),
with every string cut short (:class:`ShortStrings`)
and each message built only as far as search looks: its memory is bounded
whatever the file holds (one 60 MB message included).

Example::

    streamed = open_streamed(path)
    for message in streamed.messages():
        ...
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from ollm_cli.pipeline.recording._document import PARTIAL_KEY, REVISION_KEY, DocumentError
from ollm_cli.pipeline.records import Session, SessionMessage, SessionMetadata, SessionToolCall

STREAM_BYTES = 32 * 1024 * 1024
"""Session files at least this large are viewed and exported as a stream."""

_SCALARS = ("sessionId", "startTime", "lastActivity", "model", "provider")


@dataclass
class StreamedSession:
    """The outline of a session file, and its messages on demand."""

    path: Path
    header: Session
    """The session without its messages and tool calls (metadata included)."""
    message_count: int
    tool_call_count: int
    called_ids: set[str] = field(default_factory=set)
    result_ids: set[str] = field(default_factory=set)
    recorded: dict[str, SessionToolCall] = field(default_factory=dict)
    orphans: list[SessionToolCall] = field(default_factory=list)
    """Recorded tool calls no message mentions, by time."""
    revision: tuple[int, int] | None = None
    partial: SessionMessage | None = None

    def messages(self) -> Iterator[SessionMessage]:
        """Every message in order (then the part of an answer left by a crash)."""
        with open(self.path, "rb") as handle:
            for item in ijson.items(handle, "messages.item", use_float=True):
                yield SessionMessage.model_validate(item)
        if self.partial is not None:
            yield self.partial

    def raw_messages(self) -> Iterator[dict[str, Any]]:
        """Every message as the file holds it (for a JSON export)."""
        with open(self.path, "rb") as handle:
            yield from ijson.items(handle, "messages.item", use_float=True)

    def raw_tool_calls(self) -> Iterator[dict[str, Any]]:
        """Every recorded tool call as the file holds it (for a JSON export)."""
        with open(self.path, "rb") as handle:
            yield from ijson.items(handle, "toolCalls.item", use_float=True)


@contextmanager
def gc_relaxed() -> Iterator[None]:
    """Collect cycles less often while a session streams: each message makes many
    short-lived objects, and the default thresholds ran the collector so often that
    it doubled the time of a 100 MB view. Memory stays bounded (what is made is
    freed by reference counting; cycles still get collected, only later)."""
    before = gc.get_threshold()
    gc.set_threshold(100_000, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def open_streamed(path: Path) -> StreamedSession:
    """Read the outline of the session file at ``path`` (passes 1 and 2).

    Raises ``ValueError`` when the file is not a session file (a torn one
    included: ijson's ``IncompleteJSONError`` is no ``ValueError``); callers fall
    back to reading it whole, which reports it.
    """
    try:
        return _open_streamed(path)
    except ijson.JSONError as error:
        raise ValueError(f"{path.name} is not a whole session file ({error})") from None


def _open_streamed(path: Path) -> StreamedSession:
    outline = _read_outline(path)
    built = outline.built
    metadata = built["metadata"] if isinstance(built["metadata"], dict) else {}
    revision: tuple[int, int] | None = None
    stored = built[REVISION_KEY]
    if isinstance(stored, dict):
        revision = (int(stored.get("epoch", 0)), int(stored.get("seq", 0)))
    partial: SessionMessage | None = None
    if isinstance(built[PARTIAL_KEY], dict):
        partial = SessionMessage.model_validate(built[PARTIAL_KEY])
    recorded, orphans = _read_tool_calls(path, outline.called, outline.results)
    header = Session.model_validate(
        {
            **outline.scalars,
            "messages": [],
            "toolCalls": [],
            "metadata": SessionMetadata.model_validate(metadata).to_dict(),
        }
    )
    return StreamedSession(
        path=path,
        header=header,
        message_count=outline.messages + (1 if partial is not None else 0),
        tool_call_count=outline.calls,
        called_ids=outline.called,
        result_ids=outline.results,
        recorded=recorded,
        orphans=orphans,
        revision=revision,
        partial=partial,
    )


@dataclass
class _Outline:
    """What pass 1 finds: the top-level scalars, the objects kept whole (metadata,
    revision, partial answer), the tool call and result ids, the counts."""

    scalars: dict[str, Any] = field(default_factory=dict)
    built: dict[str, Any] = field(default_factory=dict)
    called: set[str] = field(default_factory=set)
    results: set[str] = field(default_factory=set)
    messages: int = 0
    calls: int = 0


def _read_outline(path: Path) -> _Outline:
    """Pass 1: one walk over the file's events, holding one event at a time."""
    outline = _Outline()
    part_type = None
    builders = {key: ijson.ObjectBuilder() for key in ("metadata", REVISION_KEY, PARTIAL_KEY)}
    with open(path, "rb") as handle:
        for prefix, event, value in ijson.parse(handle, use_float=True):
            top = prefix.partition(".")[0]
            builder = builders.get(top)
            if builder is not None:
                builder.event(event, value)
                continue
            if event == "start_map":
                if prefix == "messages.item":
                    outline.messages += 1
                elif prefix == "toolCalls.item":
                    outline.calls += 1
                continue
            if prefix == "messages.item.parts.item.type":
                part_type = value
            elif prefix == "messages.item.parts.item.id" and part_type == "tool_call":
                outline.called.add(str(value))
            elif prefix == "messages.item.parts.item.toolCallId":
                outline.results.add(str(value))
            elif prefix in _SCALARS and event == "string":
                outline.scalars[prefix] = value
    outline.built = {key: getattr(b, "value", None) for key, b in builders.items()}
    return outline


def _read_tool_calls(
    path: Path, called: set[str], results: set[str]
) -> tuple[dict[str, SessionToolCall], list[SessionToolCall]]:
    """Pass 2: the recorded tool calls by id (the first of an id; a result that a
    message holds is not kept twice) and those no message mentions, by time."""
    recorded: dict[str, SessionToolCall] = {}
    orphans: list[SessionToolCall] = []
    with open(path, "rb") as handle:
        for item in ijson.items(handle, "toolCalls.item", use_float=True):
            call = SessionToolCall.model_validate(item)
            if call.id in recorded:
                continue
            if call.id in results:  # the message holding its result shows it
                call = call.model_copy(
                    update={"result": call.result.model_copy(update={"llm_content": ""})}
                )
            recorded[call.id] = call
            if call.id not in called and call.id not in results:
                orphans.append(call)
    return recorded, orphans


# -- strings cut short --------------------------------------------------------------------
#
# An incremental JSON parser (ijson) still hands over each string whole: one 60 MB
# message is 60 MB (and more, decoded) in memory however the file is read.
# ShortStrings wraps a binary file and yields the same JSON with every string literal
# longer than ``limit`` bytes (as written in the file, escapes included) cut to its first
# ``limit`` bytes, still valid JSON: never inside an escape (``\n``, ``\u00e9``, a
# surrogate pair) nor a UTF-8 character. What is dropped is skipped at the speed of
# ``bytes.find``, never kept. Between reads it keeps whether it is inside a string, how
# much of it was kept, and at most a few bytes held back where a read ended inside an
# escape or a character.

_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_BACKSLASH = 0x5C
_CHUNK = 1 << 16


def _backslashes_before(data: bytes, at: int, floor: int) -> int:
    """How many backslashes come right before ``data[at]`` (from ``floor`` on)."""
    start = at
    while start > floor and data[start - 1] == _BACKSLASH:
        start -= 1
    return at - start


def _unit_at(data: bytes, at: int, floor: int) -> tuple[int, int]:
    """The escape (start, length) that the backslash at ``at`` belongs to: it opens one
    (``\\uXXXX``: 6 bytes, others 2) or is the escaped character of ``\\\\``."""
    if _backslashes_before(data, at, floor) % 2:
        return at - 1, 2
    return at, 6 if data[at + 1 : at + 2] == b"u" else 2


def _string_end(data: bytes, at: int, end: int) -> int:
    """Where the string whose content goes on at ``data[at]`` closes (its quote), or
    ``end``: the next quote that no backslash escapes."""
    while True:
        quote = data.find(b'"', at, end)
        if quote < 0 or _backslashes_before(data, quote, at) % 2 == 0:
            return end if quote < 0 else quote
        at = quote + 1


class ShortStrings:
    """A binary stream of JSON with every string cut to ``limit`` bytes (see above).

    Example::

        with open(path, "rb") as raw:
            for prefix, event, value in ijson.parse(ShortStrings(raw, 65536)):
                ...  # no string value is longer than 65,536 bytes of the file
    """

    def __init__(self, raw: BinaryIO, limit: int, *, chunk: int = _CHUNK) -> None:
        """``chunk``: how much of ``raw`` one read takes."""
        self.raw = raw
        self.limit = limit
        self.chunk = chunk
        self.cut = 0
        """How many strings were cut so far."""
        self._in_string = False
        self._kept = 0
        self._dropping = False
        self._pending = b""
        self._out = bytearray()
        self._eof = False

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of the cut JSON (all of it when ``size`` is negative);
        empty only at the end."""
        while (size < 0 or len(self._out) < size) and not self._eof:
            chunk = self.raw.read(self.chunk)
            self._eof = not chunk
            self._feed(self._pending + chunk)
        if size < 0 or size >= len(self._out):
            taken = bytes(self._out)
            self._out.clear()
            return taken
        taken = bytes(self._out[:size])
        del self._out[:size]
        return taken

    def _safe_end(self, data: bytes) -> int:
        """How much of ``data`` can be read now: not a final escape or UTF-8 character
        whose rest is still to come (the end of the file ends everything)."""
        if self._eof:
            return len(data)
        end = len(data)
        last = data.rfind(b"\\", max(0, end - 6))
        if last >= 0:
            start, length = _unit_at(data, last, 0)
            if start + length > end:
                end = start
        if (
            end >= 6
            and _HIGH_SURROGATE.fullmatch(data, end - 6, end)
            and _backslashes_before(data, end - 6, 0) % 2 == 0
        ):
            end -= 6  # its low surrogate may follow: the pair is read together
        for back in range(1, min(4, end) + 1):
            byte = data[end - back]
            if byte & 0xC0 == 0xC0:  # the lead byte of a character of 2 to 4 bytes
                length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                if back < length:
                    end -= back
                break
            if byte & 0x80 == 0:
                break
        return end

    def _feed(self, data: bytes) -> None:
        end = self._safe_end(data)
        self._pending = data[end:]
        out = self._out
        at = 0
        while at < end:
            if not self._in_string:
                quote = data.find(b'"', at, end)
                if quote < 0:
                    out += data[at:end]
                    return
                out += data[at : quote + 1]
                at = quote + 1
                self._in_string, self._kept, self._dropping = True, 0, False
                continue
            stop = _string_end(data, at, end)
            if not self._dropping:
                room = self.limit - self._kept
                if stop - at <= room:
                    out += data[at:stop]
                    self._kept += stop - at
                else:
                    cut = self._cut_point(data, at, at + room)
                    out += data[at:cut]
                    self._dropping = True
                    self.cut += 1
            if stop < end:  # its closing quote
                out += b'"'
                self._in_string = False
                stop += 1
            at = stop

    @staticmethod
    def _cut_point(data: bytes, floor: int, cut: int) -> int:
        """``cut``, moved back so that it splits no escape, no surrogate pair and no
        UTF-8 character of the string content that begins at ``floor``."""
        last = data.rfind(b"\\", max(floor, cut - 6), cut)
        if last >= 0:
            start, length = _unit_at(data, last, floor)
            if start + length > cut:
                cut = start
        while cut > floor and data[cut] & 0xC0 == 0x80:
            cut -= 1
        if (
            cut - 6 >= floor
            and _HIGH_SURROGATE.fullmatch(data, cut - 6, cut)
            and _backslashes_before(data, cut - 6, floor) % 2 == 0
        ):
            cut -= 6  # a high surrogate keeps its low one, or goes
        return cut


_LISTS = {"messages": "message", "toolCalls": "toolCall"}


@dataclass
class IndexedStream:
    """What the session index needs of a large session file, read in one pass in
    bounded memory: each message and tool call (:meth:`items`), then the top-level
    fields and the metadata (:attr:`header`) and the counts.

    Every string of the file is cut to ``text_bytes`` bytes (far more than the longest
    key a session file has: keys are strings too), and a message or tool call
    stops being built once its strings pass twice that (an event counts 8 bytes):
    search looks at no more. :meth:`items` raises :class:`DocumentError` when the file
    is not a session file's JSON (the index then reports it, as for a small one).
    """

    raw: BinaryIO
    text_bytes: int
    header: dict[str, Any] = field(default_factory=dict)
    message_count: int = 0
    tool_call_count: int = 0

    def items(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        """``(kind, index, item)`` for each message (``"message"``) and tool call
        (``"toolCall"``), each as far as it was built."""
        try:
            yield from self._items()
        except ijson.JSONError as error:  # IncompleteJSONError is no ValueError
            raise DocumentError(f"not valid JSON ({_reason(error)})") from None

    def _items(self) -> Iterator[tuple[str, int, dict[str, Any]]]:
        metadata = ijson.ObjectBuilder()
        item: ijson.ObjectBuilder | None = None
        budget = 0
        events = ijson.parse(ShortStrings(self.raw, self.text_bytes), use_float=True)
        for prefix, event, value in events:
            top, _, rest = prefix.partition(".")
            kind = _LISTS.get(top)
            if kind is not None and rest:
                if rest == "item" and event == "start_map":
                    item, budget = ijson.ObjectBuilder(), 2 * self.text_bytes
                elif rest == "item" and event == "end_map" and item is not None:
                    yield kind, self._counted(kind), item.value
                    item = None
                    continue
                elif rest == "item" and event != "map_key":
                    raise DocumentError(f"field {top!r} is not a list of objects")
                if item is not None and budget > 0:
                    item.event(event, value)
                    budget -= len(value) if isinstance(value, str) else 8
            elif kind is not None and event not in ("start_array", "end_array"):
                raise DocumentError(f"field {top!r} is not a list of objects")
            elif top == "metadata":
                metadata.event(event, value)
            elif prefix in _SCALARS:
                self.header[prefix] = value if event in ("string", "number") else None
            elif not prefix and event == "start_array":
                raise DocumentError("a session file holds an object, not a list")
        self.header["metadata"] = getattr(metadata, "value", None) or {}

    def _counted(self, kind: str) -> int:
        """The index of the next item of ``kind``, counted."""
        if kind == "message":
            self.message_count += 1
            return self.message_count - 1
        self.tool_call_count += 1
        return self.tool_call_count - 1


def _reason(error: ijson.JSONError) -> str:
    """What the parser found wrong, without the text of the file it quotes after it (a
    session's text may hold a secret: it is never put in a message)."""
    said = error.args[0] if error.args else ""
    text = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    return text.split("\n", 1)[0].strip() or "not JSON"
