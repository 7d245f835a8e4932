"""The session document: a session file held as JSON-ready data, with its revision.

An open session is kept as the plain data of its file (camelCase keys, the
format of spec 001 settled by the spec README), so that recording a message is
an ``append`` and saving is one ``orjson.dumps``, whatever the session's size.
The file carries one field of ours besides the spec's: ``revision``
(``{"epoch": ..., "seq": ...}``), which says which journal entries it already
holds (see :mod:`ollm_cli.pipeline.recording._journal`). It never appears in the
:class:`~ollm_cli.pipeline.records.Session` handed out.

:meth:`SessionDocument.to_session` builds the pydantic models. Validating ten
thousand messages through pydantic costs several times the JSON parse, so the
common shapes this store writes (text, tool-call and tool-result parts, tool
calls) are checked field by field here and built directly; anything else
(unknown fields, unusual types, other parts) goes through full pydantic
validation. Untrusted input (imports) is always validated in full.

Example::

    doc = SessionDocument.decode(path.read_bytes(), session_id)
    doc.apply({"m": SessionMessage.user("hi").to_dict(), "la": now_iso()})
    session = doc.to_session()
    path.write_bytes(doc.encode())
"""

from __future__ import annotations

import contextlib
import gc
import random
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from ollm_cli.base.errors import SessionError
from ollm_cli.pipeline.recording._ids import is_session_id
from ollm_cli.pipeline.recording._journal import Change
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionMetadata,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)

REVISION_KEY = "revision"
PARTIAL_KEY = "partialAnswer"
"""The part of an answer recorded while it streams (an assistant message marked
``"interrupted": true``), until the whole answer replaces it. A session read with
one still there (its process died mid-answer) shows it as an interrupted answer."""
ROLES = frozenset({"user", "assistant", "system", "tool"})

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__
_FAST = BaseModel.__slots__ == (
    "__dict__",
    "__pydantic_fields_set__",
    "__pydantic_extra__",
    "__pydantic_private__",
)
_iso = datetime.fromisoformat


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector while a large acyclic object graph is built.

    Parsing a big session creates tens of thousands of containers; each burst
    makes the collector walk the whole heap again, which can cost more than
    the parse itself. Nothing built here holds a cycle, so nothing is lost by
    collecting afterwards. Nested and concurrent pauses are counted.
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


class DocumentError(ValueError):
    """The bytes are not a session file (the reason is the message)."""


def construct(cls: type[M], values: dict[str, Any], extra: dict[str, Any] | None = None) -> M:
    """An instance of ``cls`` from values already checked, keyed by attribute name.

    What ``model_construct`` does, without its per-field Python loop; ``values``
    must hold every field. Falls back to ``model_construct`` if pydantic's
    instance layout ever changes.
    """
    if not _FAST:  # pragma: no cover - only with a pydantic whose layout differs
        return cls.model_construct(**values, **(extra or {}))
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", extra if extra is not None else {})
    _set(obj, "__pydantic_private__", None)
    return obj


def new_epoch() -> int:
    """A random incarnation number for a new session file."""
    return random.getrandbits(63)


def _is_iso(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        _iso(value)
    except ValueError:
        return False
    return True


def _opt_str(value: Any) -> bool:
    return value is None or type(value) is str


class SessionDocument:
    """The data of one session file, and which journal entries it holds (epoch, seq)."""

    __slots__ = ("data", "epoch", "seq")

    def __init__(self, data: dict[str, Any], epoch: int, seq: int) -> None:
        self.data = data
        self.epoch = epoch
        self.seq = seq

    # -- in and out of files ---------------------------------------------------------

    @classmethod
    def decode(cls, raw: bytes, expected_id: str | None = None) -> SessionDocument:
        """Parse a session file, checking its top-level shape (messages are checked lazily).

        Raises :class:`DocumentError` saying what is wrong.
        """
        try:
            with gc_paused():
                data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            data = _lenient_json(raw)
            if data is None:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as bad:
                    raise DocumentError(
                        f"not valid UTF-8 (byte 0x{raw[bad.start]:02x} at offset {bad.start})"
                    ) from None
                raise DocumentError(f"not valid JSON ({exc})") from None
        return cls.from_data(data, expected_id)

    @classmethod
    def from_data(cls, data: Any, expected_id: str | None = None) -> SessionDocument:
        """Adopt parsed file data (see :meth:`decode`)."""
        if not isinstance(data, dict):
            raise DocumentError(f"a session file holds an object, not {type(data).__name__}")
        revision = data.pop(REVISION_KEY, None)
        epoch, seq = new_epoch(), 0
        if (
            isinstance(revision, dict)
            and type(revision.get("epoch")) is int
            and type(revision.get("seq")) is int
        ):
            epoch, seq = revision["epoch"], revision["seq"]
        for key in _HEADER_KEYS:
            if type(data.get(key)) is not str:
                raise DocumentError(f"field {key!r} is missing or not a string")
        if expected_id is not None and data["sessionId"] != expected_id:
            raise DocumentError(
                f"it holds session {data['sessionId']!r}, not the {expected_id} of its name"
            )
        for key in ("startTime", "lastActivity"):
            if not _is_iso(data[key]):
                raise DocumentError(f"field {key!r} is not an ISO 8601 timestamp")
        for key in ("messages", "toolCalls"):
            value = data.setdefault(key, [])
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise DocumentError(f"field {key!r} is not a list of objects")
        try:
            metadata = SessionMetadata.model_validate(data.get("metadata") or {})
        except ValidationError as exc:
            raise DocumentError(f"field 'metadata' is invalid ({_first_error(exc)})") from None
        data["metadata"] = metadata.to_dict()
        return cls(data, epoch, seq)

    @classmethod
    def from_session(cls, session: Session, epoch: int | None = None) -> SessionDocument:
        """The document of a validated session (a new one, or an import)."""
        data = session.to_dict()
        data.pop(REVISION_KEY, None)
        return cls(data, new_epoch() if epoch is None else epoch, 0)

    def encode(self) -> bytes:
        """The bytes of the session file, revision included."""
        data = self.data
        data[REVISION_KEY] = {"epoch": self.epoch, "seq": self.seq}
        try:
            return orjson.dumps(data, option=orjson.OPT_INDENT_2)
        finally:
            del data[REVISION_KEY]

    # -- changes ---------------------------------------------------------------------

    def apply(self, change: Change) -> None:
        """Apply one journal payload (see :class:`~ollm_cli.pipeline.recording._journal.Change`):
        ``m`` message, ``t`` tool call, ``la`` lastActivity,
        ``md`` metadata fields (camelCase, new values), ``hd`` top-level fields, ``pa``
        the answer streaming so far (None: the answer is recorded, drop it)."""
        data = self.data
        if "pa" in change:
            partial = change["pa"]
            if partial is None:
                data.pop(PARTIAL_KEY, None)
            else:
                data[PARTIAL_KEY] = partial
        message = change.get("m")
        if message is not None:
            data["messages"].append(message)
        call = change.get("t")
        if call is not None:
            data["toolCalls"].append(call)
        last = change.get("la")
        if last is not None:
            data["lastActivity"] = last
        fields = change.get("md")
        if fields:
            data["metadata"].update(fields)
        header = change.get("hd")
        if header:
            data.update(header)

    @property
    def session_id(self) -> str:
        """The session's id (:class:`SessionError` if the document has none)."""
        return self._header("sessionId")

    def _header(self, key: str) -> str:
        """A top-level field every session has; a document without it is refused
        with a clear error (it was built wrong: a bare ``KeyError`` said nothing)."""
        value = self.data.get(key)
        if type(value) is not str:
            present = ", ".join(sorted(self.data)) or "none"
            raise SessionError(
                f"a session document has no {key!r} field (its fields: {present}); "
                "nothing was written from it",
                hint="this is a bug in OLLM; the session files on disk are unchanged, "
                "please report it with this message",
            )
        return value

    @property
    def metadata(self) -> dict[str, Any]:
        """The ``metadata`` object (camelCase keys), mutable in place."""
        meta: dict[str, Any] = self.data["metadata"]
        return meta

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages as file data (append-only)."""
        messages: list[dict[str, Any]] = self.data["messages"]
        return messages

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as file data (append-only)."""
        calls: list[dict[str, Any]] = self.data["toolCalls"]
        return calls

    # -- models ----------------------------------------------------------------------

    def to_session(self) -> Session:
        """The :class:`Session` this document holds (``ValidationError`` if it is invalid).

        The models share immutable values (and tool ``args``) with the document:
        treat the result as read-only data.
        """
        data = self.data
        for key in _HEADER_KEYS:
            self._header(key)
        if not is_session_id(data["sessionId"]):
            return Session.model_validate(data)
        with gc_paused():
            messages = [_message(m) or SessionMessage.model_validate(m) for m in data["messages"]]
            partial = data.get(PARTIAL_KEY)
            if isinstance(partial, dict):
                with contextlib.suppress(ValidationError):
                    messages.append(SessionMessage.model_validate(partial))
            calls = [_tool_call(c) or SessionToolCall.model_validate(c) for c in data["toolCalls"]]
        metadata = SessionMetadata.model_validate(data["metadata"])
        extra = {k: v for k, v in data.items() if k not in _SESSION_KEYS}
        return construct(
            Session,
            {
                "session_id": data["sessionId"],
                "start_time": data["startTime"],
                "last_activity": data["lastActivity"],
                "model": data["model"],
                "provider": data["provider"],
                "messages": messages,
                "tool_calls": calls,
                "metadata": metadata,
            },
            extra,
        )


_HEADER_KEYS = ("sessionId", "startTime", "lastActivity", "model", "provider")
_SESSION_KEYS = frozenset(
    {
        "sessionId",
        "startTime",
        "lastActivity",
        "model",
        "provider",
        "messages",
        "toolCalls",
        "metadata",
        PARTIAL_KEY,
    }
)
_TEXT_KEYS = frozenset({"type", "text"})
_CALL_PART_KEYS = frozenset({"type", "id", "name", "args"})
_RESULT_PART_KEYS = frozenset({"type", "toolCallId", "name", "content", "isError"})
_MESSAGE_KEYS = frozenset({"role", "parts", "timestamp"})
_TOOL_CALL_KEYS = frozenset(
    {"id", "name", "args", "result", "timestamp", "durationMs", "success", "error"}
)
_RESULT_KEYS = frozenset({"llmContent", "returnDisplay"})


def _part(part: Any) -> BaseModel | None:
    if type(part) is not dict:
        return None
    kind = part.get("type")
    if kind == "text":
        text = part.get("text")
        if type(text) is str and part.keys() <= _TEXT_KEYS:
            return construct(TextPart, {"type": "text", "text": text})
        return None
    if kind == "tool_call":
        ident, name, args = part.get("id"), part.get("name"), part.get("args", {})
        if (
            type(ident) is str
            and type(name) is str
            and type(args) is dict
            and part.keys() <= _CALL_PART_KEYS
        ):
            return construct(
                ToolCallPart, {"type": "tool_call", "id": ident, "name": name, "args": args}
            )
        return None
    if kind == "tool_result":
        call_id, name, content = part.get("toolCallId"), part.get("name"), part.get("content")
        is_error = part.get("isError", False)
        if (
            type(call_id) is str
            and type(name) is str
            and type(content) is str
            and type(is_error) is bool
            and part.keys() <= _RESULT_PART_KEYS
        ):
            return construct(
                ToolResultPart,
                {
                    "type": "tool_result",
                    "tool_call_id": call_id,
                    "name": name,
                    "content": content,
                    "is_error": is_error,
                },
            )
    return None


def _message(message: dict[str, Any]) -> SessionMessage | None:
    """The message built directly when it has the shape we write, else None."""
    if message.keys() != _MESSAGE_KEYS or message["role"] not in ROLES:
        return None
    timestamp, raw_parts = message["timestamp"], message["parts"]
    if type(raw_parts) is not list or not _is_iso(timestamp):
        return None
    parts = []
    for raw in raw_parts:
        part = _part(raw)
        if part is None:
            return None
        parts.append(part)
    return construct(
        SessionMessage, {"role": message["role"], "parts": parts, "timestamp": timestamp}
    )


def _tool_call(call: dict[str, Any]) -> SessionToolCall | None:
    """The tool call built directly when it has the shape we write, else None."""
    if not call.keys() <= _TOOL_CALL_KEYS:
        return None
    ident, name, args, result = (
        call.get("id"),
        call.get("name"),
        call.get("args", {}),
        call.get("result"),
    )
    timestamp = call.get("timestamp")
    duration = call.get("durationMs")
    success, error = call.get("success"), call.get("error")
    if not (
        type(ident) is str
        and type(name) is str
        and type(args) is dict
        and type(result) is dict
        and result.keys() <= _RESULT_KEYS
        and type(result.get("llmContent")) is str
        and _opt_str(result.get("returnDisplay"))
        and _is_iso(timestamp)
        and (duration is None or type(duration) in (int, float))
        and (success is None or type(success) is bool)
        and _opt_str(error)
    ):
        return None
    tool_result = construct(
        ToolResult,
        {"llm_content": result["llmContent"], "return_display": result.get("returnDisplay")},
    )
    return construct(
        SessionToolCall,
        {
            "id": ident,
            "name": name,
            "args": args,
            "result": tool_result,
            "timestamp": timestamp,
            "duration_ms": float(duration) if duration is not None else None,
            "success": success,
            "error": error,
        },
    )


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{where}: {err['msg']}" if where else str(err["msg"])


def _lenient_json(raw: bytes) -> Any | None:
    """JSON that orjson refuses only for a lone surrogate escape (``"\\ud800"``):
    valid JSON by its grammar, whose string cannot be UTF-8. Parsed with the
    standard library, each lone surrogate becomes U+FFFD so the text can be
    shown and saved. None when the bytes are not such JSON."""
    import json

    if b"\\u" not in raw:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return _replace_surrogates(data)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value
