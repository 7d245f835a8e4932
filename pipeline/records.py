"""The session records, in the file format settled by the spec README.

One definition of each record: the session file, the journal, the index, the
actors' messages and the CLI all go through these models. Field names on disk
are the spec's camelCase (``sessionId``, ``lastActivity``, ``llmContent``);
attributes are snake_case. Fields we do not know are kept (``extra="allow"``)
and written back unchanged, so a file written by a newer OLLM survives a load
and save by this one.

What the session store answers beside the sessions themselves (a search hit,
its health, what a close could not save) is here too: those records cross the
conversation contract and the service's socket, and a thin client reads them
without importing the store (sqlite, the journal, the index).

Example::

    msg = SessionMessage.user("Hello")
    msg.text                       # "Hello"
    Session.from_json(session.to_json()) == session
"""

# No `from __future__ import annotations` here: pydantic evaluates a string annotation
# when it creates the class, a quarter of the time it takes to create these models,
# which every command does (a warm `ollm run -p` among them).
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic.alias_generators import to_camel

from ollm_cli.base.deferred_model import DeferredModel

Role = Literal["user", "assistant", "system", "tool"]


def now_iso() -> str:
    """The current UTC time as ISO 8601 with microseconds and a ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 timestamp (``Z`` or an offset; naive means UTC)."""
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _check_iso(value: str) -> str:
    try:
        parse_iso(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 timestamp") from None
    return value


def _check_uuid(value: str) -> str:
    try:
        uuid.UUID(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a UUID") from None
    return value


Timestamp = Annotated[str, AfterValidator(_check_iso)]
SessionId = Annotated[str, AfterValidator(_check_uuid)]


class Record(DeferredModel):
    """Base of every record: camelCase on disk, unknown fields kept.

    A record's validator is built when it is first used, not at import: a command
    pays only for the records it reads (``sessions list`` builds SessionSummary's);
    the actors' threads build it one at a time (see DeferredModel).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        ser_json_inf_nan="constants",
        defer_build=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data with the spec's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)


class TextPart(Record):
    """Plain text of a message."""

    type: Literal["text"] = "text"
    text: str


class ThinkingPart(Record):
    """The reasoning a thinking model gave before its answer (spec 003's "thinking
    traces"): recorded and shown folded, never sent back to the model as answer
    text, left out of summaries. ``tokens`` is how many tokens it took, when known."""

    type: Literal["thinking"] = "thinking"
    text: str
    tokens: int | None = None


class ToolCallPart(Record):
    """The model asked for a tool to run (in an assistant message)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolResultPart(Record):
    """What a tool returned (in a tool message), matched to its call by ``toolCallId``."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


class ImagePart(Record):
    """A reference to an image (a path or URL), never the bytes."""

    type: Literal["image"] = "image"
    path: str | None = None
    url: str | None = None
    mime_type: str | None = None


class UnknownPart(Record):
    """A part of a kind this version does not know; kept as it was."""

    type: str


def _part_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if kind in {"text", "thinking", "tool_call", "tool_result", "image"} else "unknown"


MessagePart = Annotated[
    Annotated[TextPart, Tag("text")]
    | Annotated[ThinkingPart, Tag("thinking")]
    | Annotated[ToolCallPart, Tag("tool_call")]
    | Annotated[ToolResultPart, Tag("tool_result")]
    | Annotated[ImagePart, Tag("image")]
    | Annotated[UnknownPart, Tag("unknown")],
    Discriminator(_part_tag),
]


class SessionMessage(Record):
    """One message of the conversation: ``role``, ``parts``, ``timestamp``."""

    role: Role
    parts: list[MessagePart]
    timestamp: Timestamp = Field(default_factory=now_iso)

    @property
    def text(self) -> str:
        """The text parts joined by newlines (tool calls and images left out)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def thinking(self) -> str:
        """The reasoning parts joined by newlines (empty when the model gave none)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, ThinkingPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls this message asks for."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @classmethod
    def of_text(cls, role: Role, text: str) -> "SessionMessage":
        """A message holding one text part."""
        return cls(role=role, parts=[TextPart(text=text)])

    @classmethod
    def user(cls, text: str) -> "SessionMessage":
        """A user message holding ``text``."""
        return cls.of_text("user", text)

    @classmethod
    def assistant(cls, text: str) -> "SessionMessage":
        """An assistant message holding ``text``."""
        return cls.of_text("assistant", text)

    @classmethod
    def system(cls, text: str) -> "SessionMessage":
        """A system message holding ``text``."""
        return cls.of_text("system", text)


class ToolResult(Record):
    """The spec's tool result: what the model sees and what the user sees."""

    llm_content: str
    return_display: str | None = None


class SessionToolCall(Record):
    """A tool invocation and its result, with 004's duration and outcome."""

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    result: ToolResult
    timestamp: Timestamp = Field(default_factory=now_iso)
    duration_ms: float | None = None
    success: bool | None = None
    error: str | None = None


class CompressionCheckpoint(Record):
    """The active context a compression left, as the session file keeps it.

    The session's messages ``[0, coversThrough)`` are stood for by ``summary``
    (the one rolling summary, ``None`` when there is none) and by ``head``: the
    messages kept before the verbatim rest, each either the position of a
    session message kept as it is (a user message) or a shortened copy (an old
    tool result cut down). Messages from ``coversThrough`` on are sent as they
    are. ``fingerprint`` is a digest of the messages ``[0, coversThrough)`` as
    the file held them when the checkpoint was recorded: a checkpoint whose
    digest no longer matches the file is not used.
    """

    summary: str | None = None
    covers_through: int = Field(ge=0)
    head: list[int | SessionMessage] = Field(default_factory=list)
    fingerprint: str | None = None
    summary_tokens: int | None = None


class CompressionEvent(Record):
    """One entry of ``metadata.compressionHistory``.

    ``trigger`` says what started it (``auto``: the budget; ``manual``:
    ``/compress``, with its ``focus``; ``resume``: a resumed session over its
    window; ``restore``: a snapshot restored, not a compression and not
    counted). ``checkpoint`` is the active context it left.
    """

    timestamp: Timestamp = Field(default_factory=now_iso)
    strategy: str
    tokens_before: int
    tokens_after: int
    fallback: str | None = None
    requested_strategy: str | None = None
    model: str | None = None
    trigger: str | None = None
    focus: str | None = None
    notes: list[str] = Field(default_factory=list)
    checkpoint: CompressionCheckpoint | None = None


class SessionMetadata(Record):
    """``metadata`` of a session: counts from 001, organisation fields from 004."""

    token_count: int = 0
    compression_count: int = 0
    title: str | None = None
    title_source: Literal["auto", "model", "manual"] | None = None
    working_dir: str | None = None
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None
    pinned: bool = False
    custom: dict[str, Any] = Field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thinking_tokens: int = 0
    """Of ``completionTokens``, those spent on reasoning (``thinking`` parts)."""
    compression_history: list[CompressionEvent] = Field(default_factory=list)
    mode_history: list[dict[str, Any]] = Field(default_factory=list)


class Session(Record):
    """A whole session file."""

    session_id: SessionId
    start_time: Timestamp
    last_activity: Timestamp
    model: str
    provider: str
    messages: list[SessionMessage] = Field(default_factory=list)
    tool_calls: list[SessionToolCall] = Field(default_factory=list)
    metadata: SessionMetadata = Field(default_factory=SessionMetadata)

    def to_json(self) -> bytes:
        """The session as the bytes of its file (camelCase, indented)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes | str) -> "Session":
        """Parse and validate the bytes of a session file."""
        return cls.model_validate(orjson.loads(data))


class SessionSummary(Record):
    """What ``list_sessions`` returns for each session."""

    session_id: str
    start_time: str
    last_activity: str
    model: str
    provider: str = ""
    message_count: int = 0
    tool_call_count: int = 0
    token_count: int = 0
    title: str | None = None
    tags: list[str] = Field(default_factory=list)
    pinned: bool = False
    forked_from: str | None = None
    """The id of the session this one was forked from (``metadata.forkedFrom``)."""


MARK_START = "«"
"""What a :class:`SearchHit`'s snippet puts before each matched word."""
MARK_END = "»"
"""What a :class:`SearchHit`'s snippet puts after each matched word."""

Where = Literal["message", "toolCall", "metadata"]


class SearchHit(Record):
    """One session matching a search: its best match, with a highlighted snippet.

    ``snippet`` wraps each matched word in ``«`` and ``»``; ``where`` says what
    matched (a message, whose ``role`` is given, a tool call, or the session's
    title/notes/tags) and ``index`` its position in the session's list.
    """

    session_id: str
    title: str | None = None
    snippet: str
    score: float
    where: Where
    role: str | None = None
    index: int = 0
    last_activity: str = ""
    model: str = ""


class StoreHealth(Record):
    """Whether everything recorded is durable; what the pipeline shows when it is not."""

    ok: bool
    pending_writes: int = 0
    unsaved_sessions: list[str] = Field(default_factory=list)
    last_error: str | None = None


class CloseReport(Record):
    """What :meth:`ChatRecordingService.close` could not make durable in the sessions folder.

    ``unsaved_records`` counts the records the disk refused to the end;
    ``rescue_file`` is where they were kept instead (None: nowhere was writable,
    they are lost); ``sessions`` names the sessions they belong to.
    """

    ok: bool
    unsaved_records: int = 0
    # a default, not default_factory=list: pydantic reads a factory's signature, and a
    # builtin's is parsed from text (tokenize's regex compiled: ms of every ollm run -p)
    sessions: list[str] = Field(default=[])
    rescue_file: str | None = None
    error: str | None = None
