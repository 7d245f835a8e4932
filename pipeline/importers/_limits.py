"""What an imported session may hold: messages of a bounded size, no time to come.

Every import (other tools' sessions and OLLM's own session files) passes each
session through :meth:`ImportLimits.admit` before it is stored:

- **A message holds at most** ``max_message_bytes`` **of text** (UTF-8; the text
  and reasoning parts, tool results and the strings of tool-call arguments, in
  order): the part that crosses the bound keeps its beginning and ends with a
  placeholder saying how much was left out (``[… 58.2 MB more of this text …:
  not imported]``), and the parts after it keep only such a placeholder. A
  recorded tool call (its arguments, result and error) has the same bound. One
  60 MB message once made every later ``ollm sessions search`` take a minute.
- **No time is in the future** (beyond :data:`CLOCK_SKEW`): such a time becomes
  the import's own, and the session's original ``startTime`` and
  ``lastActivity`` are kept in ``metadata.custom.importedFrom``
  (``originalStartTime``, ``originalLastActivity``). A transcript dated 2099 was
  the latest session of its folder for good, and ``ollm run --continue`` sent
  its history to the model.

A session changed here is marked as imported (``importedFrom`` and the tag
``imported:<tool>``) even when it came from an OLLM file, so that ``--continue``
says so when it picks it; one left as it was is stored exactly as given.

Example::

    limits = ImportLimits(max_message_bytes=1 << 20, now=datetime.now(UTC))
    admitted = limits.admit(session, tool="ollm", path=Path("chat.json"))
    admitted.cut_messages, admitted.left_out_bytes, admitted.redated
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ollm_cli.pipeline.importers._content import placeholder_text
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    parse_iso,
)

CLOCK_SKEW = timedelta(minutes=5)
"""How far in the future a time may be and still be taken as written (clocks differ)."""

CAP_KEY = "services.session.importMaxMessageBytes"


def size_text(count: int) -> str:
    """A size in bytes as people read it.

    >>> size_text(999), size_text(1 << 20), size_text(61_000_000)
    ('999 bytes', '1 MB', '58.2 MB')
    """
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass
class _Budget:
    """The bytes one message (or recorded call) may still hold, and what it left out."""

    cap: int
    left: int
    left_out: int = 0

    def text(self, value: str) -> str:
        """``value`` as it may be kept: whole while it fits, else its beginning and a
        placeholder saying how much more there was."""
        if len(value) <= self.left // 4:  # fits whatever its characters' sizes
            self.left -= _bytes(value)
            return value
        encoded = value.encode("utf-8", "surrogatepass")
        if len(encoded) <= self.left:
            self.left -= len(encoded)
            return value
        kept = encoded[: self.left].decode("utf-8", "ignore")
        dropped = len(encoded) - len(kept.encode("utf-8", "surrogatepass"))
        self.left = 0
        self.left_out += dropped
        what = (
            f"… {size_text(dropped)} more of this text (a message may hold {size_text(self.cap)}"
            f" on import: {CAP_KEY})"
        )
        return (kept + "\n" if kept else "") + placeholder_text(what)

    def value(self, value: Any) -> Any:
        """``value`` (tool-call arguments) with each string kept as :meth:`text` keeps it."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value


def _message_bytes(message: SessionMessage) -> int:
    """The text a message holds, in characters (a lower bound of its bytes)."""
    total = 0
    for part in message.parts:
        if isinstance(part, TextPart | ThinkingPart):
            total += len(part.text)
        elif isinstance(part, ToolResultPart):
            total += len(part.content)
        elif isinstance(part, ToolCallPart):
            total += _strings_length(part.args)
    return total


def _strings_length(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_strings_length(v) for v in value.values())
    if isinstance(value, list):
        return sum(_strings_length(v) for v in value)
    return 0


@dataclass(frozen=True)
class Admitted:
    """A session as it may be stored, and what was changed to make it so."""

    session: Session
    cut_messages: int = 0
    """Messages whose text was cut to the bound (their recorded tool calls are too)."""
    left_out_bytes: int = 0
    redated: str | None = None
    """The original ``startTime`` (or ``lastActivity``) when times in the future were
    replaced by the import's time."""


@dataclass(frozen=True)
class ImportLimits:
    """The bounds an imported session is held to (see the module)."""

    max_message_bytes: int
    now: datetime
    skew: timedelta = field(default=CLOCK_SKEW)

    def admit(self, session: Session, *, tool: str, path: Path) -> Admitted:
        """``session`` within the bounds; ``tool`` and ``path`` name where it came from
        when the session has no ``importedFrom`` of its own and had to change."""
        cut = left_out = 0
        messages: list[SessionMessage] = []
        for message in session.messages:
            kept, dropped = self._message(message)
            messages.append(kept)
            cut += dropped > 0
            left_out += dropped
        calls = [self._call(call) for call in session.tool_calls]  # as their messages are
        recut = any(a is not b for a, b in zip(calls, session.tool_calls, strict=True))
        start, last = self._when(session.start_time), self._when(session.last_activity)
        redated = start != session.start_time or last != session.last_activity
        if not (cut or recut or redated or self._future_inside(messages, calls)):
            return Admitted(session)
        messages = [m.model_copy(update={"timestamp": self._when(m.timestamp)}) for m in messages]
        calls = [c.model_copy(update={"timestamp": self._when(c.timestamp)}) for c in calls]
        metadata = session.metadata
        custom = dict(metadata.custom)
        origin = dict(custom.get("importedFrom") or {"tool": tool, "path": str(path)})
        if start != session.start_time:
            origin["originalStartTime"] = session.start_time
        if last != session.last_activity:
            origin["originalLastActivity"] = session.last_activity
        custom["importedFrom"] = origin
        tag = f"imported:{origin.get('tool') or tool}"
        tags = metadata.tags if tag in metadata.tags else [*metadata.tags, tag]
        changed = session.model_copy(
            update={
                "start_time": min(start, last, key=parse_iso),
                "last_activity": last,
                "messages": messages,
                "tool_calls": calls,
                "metadata": metadata.model_copy(update={"custom": custom, "tags": tags}),
            }
        )
        original = session.start_time if start != session.start_time else session.last_activity
        return Admitted(changed, cut, left_out, original if redated else None)

    def _when(self, stamp: str) -> str:
        """``stamp``, or the import's time when it is in the future."""
        if parse_iso(stamp) <= self.now + self.skew:
            return stamp
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _future_inside(self, messages: list[SessionMessage], calls: list[SessionToolCall]) -> bool:
        limit = self.now + self.skew
        return any(parse_iso(m.timestamp) > limit for m in messages) or any(
            parse_iso(c.timestamp) > limit for c in calls
        )

    def _message(self, message: SessionMessage) -> tuple[SessionMessage, int]:
        """The message within the bound, and how many bytes were left out."""
        if _message_bytes(message) * 4 <= self.max_message_bytes:
            return message, 0  # the common case: no need to count bytes
        budget = _Budget(self.max_message_bytes, self.max_message_bytes)
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                parts.append(part.model_copy(update={"text": budget.text(part.text)}))
            elif isinstance(part, ToolResultPart):
                parts.append(part.model_copy(update={"content": budget.text(part.content)}))
            elif isinstance(part, ToolCallPart):
                parts.append(part.model_copy(update={"args": budget.value(part.args)}))
            else:
                parts.append(part)
        if not budget.left_out:
            return message, 0
        return message.model_copy(update={"parts": parts}), budget.left_out

    def _call(self, call: SessionToolCall) -> SessionToolCall:
        """A recorded tool call within the bound (it repeats what its messages hold, so
        what it leaves out is not counted again)."""
        size = (
            _strings_length(call.args)
            + len(call.result.llm_content)
            + len(call.result.return_display or "")
            + len(call.error or "")
        )
        if size * 4 <= self.max_message_bytes:
            return call
        budget = _Budget(self.max_message_bytes, self.max_message_bytes)
        args = budget.value(call.args)
        result = call.result.model_copy(
            update={
                "llm_content": budget.text(call.result.llm_content),
                "return_display": None
                if call.result.return_display is None
                else budget.text(call.result.return_display),
            }
        )
        error = None if call.error is None else budget.text(call.error)
        if not budget.left_out:
            return call
        return call.model_copy(update={"args": args, "result": result, "error": error})
