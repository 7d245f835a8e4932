"""Importing sessions recorded by other tools: Claude Code, Codex, Gemini CLI and llm.

Each tool's reader (``importers/_claude_code.py``, ``_codex.py``,
``_gemini.py``, ``_llm.py``) turns its files into :class:`Session`
records through a :class:`SessionBuilder`: messages with their text, reasoning,
tool calls (name, arguments) and tool results, timestamps, the model and the
working folder. ``metadata.custom.importedFrom`` keeps the tool, its own id of
the session and the file; the session's id is derived from the tool and that
id (a UUID5), so importing the same thing twice finds it already there and
creates nothing new.

A file that is not what it claims raises :class:`ImportFormatError`, whose
message names the file and the line (or the table row) and what was expected.
A damaged line in a file that is otherwise what it claims (cut short, not JSON,
not the shape its tool writes) is skipped and its number kept in
:class:`DamagedLines`, unless the import is strict, which refuses the file.
Images become :class:`ImagePart` references (never their bytes) and any other
part that is not kept becomes a bracketed placeholder text, so that nothing
vanishes silently. Text in imported files is data: it is stored and shown,
never obeyed.

Example::

    sessions = read_sessions(Path("~/.codex/sessions").expanduser(), source="codex")
    sessions[0].metadata.custom["importedFrom"]   # {"tool": "codex", "id": "…", "path": "…"}
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.records import (
    ImagePart,
    Session,
    SessionMessage,
    SessionMetadata,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    now_iso,
    parse_iso,
)

ImportSource = Literal["claude-code", "codex", "gemini", "llm"]
SOURCES: tuple[ImportSource, ...] = ("claude-code", "codex", "gemini", "llm")
_NAMESPACE = uuid.UUID("8f2b6c1e-3c1d-5a7e-9f4b-6d0c2e1a7b35")
SQLITE_MAGIC = b"SQLite format 3\x00"


class ImportFormatError(SessionError):
    """A file given to ``ollm sessions import`` is not in the format it claims."""


def bad_file(path: Path, where: str, problem: str, source: str) -> ImportFormatError:
    """The error for ``path`` at ``where`` (``line 3``, ``row 7``) holding ``problem``."""
    return ImportFormatError(
        f"{path}: {where}: {problem}",
        hint=f"this does not look like a {source} file; pass the right --from "
        "(claude-code, codex, gemini, llm) or leave it out to have the format recognised",
    )


@dataclass
class DamagedLines:
    """The lines of one file skipped as damaged (``strict``: the first one refuses the file)."""

    strict: bool = False
    lines: list[int] = field(default_factory=list)

    def skip(self, number: int, error: ImportFormatError) -> None:
        """Skip line ``number`` (or raise ``error`` when strict)."""
        if self.strict:
            error.hint = (
                f"{error.hint}; without --strict, damaged lines are skipped and counted"
                if error.hint
                else "without --strict, damaged lines are skipped and counted"
            )
            raise error
        self.lines.append(number)


def imported_session_id(source: str, source_id: str) -> str:
    """The OLLM id of the session ``source`` calls ``source_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{source}:{source_id}"))


def iso_time(value: Any, fallback: str | None = None) -> str:
    """``value`` (ISO text, or seconds or milliseconds since 1970) as an ISO timestamp."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 10**11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        except (ValueError, OverflowError, OSError):  # out of the calendar's range
            return fallback or now_iso()
    if isinstance(value, str) and value:
        try:
            parse_iso(value.replace(" ", "T", 1) if "T" not in value else value)
        except ValueError:
            pass
        else:
            return value.replace(" ", "T", 1) if "T" not in value else value
    return fallback or now_iso()


def json_lines(
    path: Path, source: str, damaged: DamagedLines
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-empty line of a JSONL file; a line that
    is not a JSON object goes to ``damaged``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            value = _with_lone_surrogates(line)
            if value is None:
                problem = f"not JSON ({exc.msg})"
                damaged.skip(number, bad_file(path, f"line {number}", problem, source))
                continue
        if not isinstance(value, dict):
            problem = f"a {type(value).__name__}, not a JSON object"
            damaged.skip(number, bad_file(path, f"line {number}", problem, source))
            continue
        if line.count(b"[") + line.count(b"{") > MAX_DEPTH and too_deep(value):
            problem = f"values nested more than {MAX_DEPTH} levels deep (OLLM stores fewer)"
            damaged.skip(number, bad_file(path, f"line {number}", problem, source))
            continue
        yield number, value


MAX_DEPTH = 200
"""How deep the values of a line may nest: orjson writes at most 255 levels, and a
session wraps a line's values in a few levels of its own."""


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` levels deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values() if isinstance(v, dict | list))
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item if isinstance(v, dict | list))
    return False


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _with_lone_surrogates(line: bytes) -> Any | None:
    """A line orjson refuses only for a lone surrogate escape (``"\\ud800"``, as a
    cut emoji leaves): valid JSON, parsed by the standard library, each lone
    surrogate becoming U+FFFD. None when the line is not such JSON."""
    if b"\\u" not in line:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return _no_surrogates(value)


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    return value


def read_json(path: Path, source: str) -> Any:
    """The JSON document in ``path``, or an error naming the line where it breaks."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SessionError(
            f"cannot read {path}: {exc.strerror}", hint="check the path and its permissions"
        ) from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise bad_file(
            path, f"line {exc.lineno}, column {exc.colno}", f"not JSON ({exc.msg})", source
        ) from None


def text_of(value: Any) -> str:
    """Readable text of a tool result or message content (strings, lists of blocks, JSON)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        pieces = [text_of(item) for item in value]
        return "\n".join(piece for piece in pieces if piece)
    if isinstance(value, dict):
        image = image_of(value)
        if image is not None:
            return placeholder_text(f"image{f' ({image.mime_type})' if image.mime_type else ''}")
        for key in ("text", "output", "content"):
            if isinstance(value.get(key), str | list):
                return text_of(value[key])
    return orjson.dumps(value).decode()


def token_count(value: Any) -> int:
    """A token count as a tool wrote it (a number, or digits); 0 for anything else."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return max(int(value), 0)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return 0


def placeholder_text(what: str) -> str:
    """The text that stands for a part not imported (``what``: what it was)."""
    return f"[{what}: not imported]"


_IMAGE_TYPES = {"image", "input_image", "image_url"}


def _mime_of_data_url(url: str) -> str | None:
    head = url[5:].split(",", 1)[0].split(";", 1)[0]
    return head or None


def image_of(block: dict[str, Any]) -> ImagePart | None:
    """The image reference of a content block of any tool (Anthropic ``image``,
    OpenAI ``input_image``, Gemini ``inlineData``/``fileData``), ``None`` if not an
    image. Only a web address is kept; embedded bytes are not."""
    url: Any = None
    mime: Any = None
    if isinstance(block.get("type"), str) and block["type"] in _IMAGE_TYPES:
        source = block.get("source")
        if isinstance(source, dict):  # Anthropic: base64 or url
            mime, url = source.get("media_type"), source.get("url")
        else:
            url = block.get("image_url")
            if isinstance(url, dict):
                url = url.get("url")
    elif isinstance(block.get("inlineData"), dict):
        mime = block["inlineData"].get("mimeType")
        if not (isinstance(mime, str) and mime.startswith("image/")):
            return None
    elif isinstance(block.get("fileData"), dict):
        mime, url = block["fileData"].get("mimeType"), block["fileData"].get("fileUri")
        if not (isinstance(mime, str) and mime.startswith("image/")):
            return None
    else:
        return None
    if isinstance(url, str) and url.startswith("data:"):
        mime, url = mime or _mime_of_data_url(url), None
    return ImagePart(
        url=url if isinstance(url, str) and url else None,
        mime_type=mime if isinstance(mime, str) and mime else None,
    )


def arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a mapping (JSON text is parsed, unless nested too deep to
    store; anything else is wrapped)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            return {"input": value}
        if too_deep(parsed):  # kept as the text it came as, which OLLM can store
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


@dataclass
class SessionBuilder:
    """Collects one imported conversation in order and makes it a :class:`Session`.

    Each message keeps the time its tool wrote for it. Parts of one role join the
    message being built until :meth:`next_message` starts the next one (a reader
    calls it where its tool begins a message: a new record, a new message id) or a
    part of another role or a tool result comes. For tools that mark no replies
    (``marks_replies`` false), reasoning that follows an answer or a call begins
    the assistant's next reply; where they are marked, a reply may interleave
    reasoning with its calls.
    """

    source: ImportSource
    source_id: str
    path: Path
    model: str = ""
    working_dir: str | None = None
    title: str | None = None
    started: str | None = None
    notes: str | None = None
    marks_replies: bool = False
    messages: list[SessionMessage] = field(default_factory=list)
    tool_calls: list[SessionToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thinking_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    _calls: dict[str, ToolCallPart] = field(default_factory=dict)
    _call_times: dict[str, str] = field(default_factory=dict)
    _answered: set[str] = field(default_factory=set)
    _open: SessionMessage | None = None
    _made_up: int = 0

    def next_message(self) -> None:
        """The parts that follow begin a new message."""
        self._open = None

    def say(self, role: Literal["user", "assistant", "system"], text: str, at: str) -> None:
        """A message of plain text (empty text is skipped)."""
        if text.strip():
            self._append(role, TextPart(text=text), at)

    def think(self, text: str, at: str, tokens: int | None = None) -> None:
        """Reasoning the assistant showed before answering."""
        if text.strip():
            self._append("assistant", ThinkingPart(text=text, tokens=tokens), at)

    def image(self, role: Literal["user", "assistant", "system"], part: ImagePart, at: str) -> None:
        """An image, kept as a reference (its address when it had one, never its bytes)."""
        self._append(role, part, at)

    def placeholder(self, role: Literal["user", "assistant", "system"], what: str, at: str) -> None:
        """A part that is not imported, named where it was (nothing vanishes silently)."""
        self._append(role, TextPart(text=placeholder_text(what)), at)

    def call(self, call_id: Any, name: str, args: Any, at: str) -> str:
        """The assistant called a tool; returns the call's id (numbered in order when it
        had none, so that importing the same file twice gives the same ids)."""
        ident = str(call_id) if call_id else self._made_up_id()
        part = ToolCallPart(id=ident, name=name or "tool", args=arguments(args))
        self._calls[ident] = part
        self._call_times[ident] = at
        self._append("assistant", part, at)
        return ident

    def result(
        self,
        call_id: Any,
        output: Any,
        at: str,
        *,
        name: Any = None,
        is_error: bool = False,
    ) -> None:
        """What a tool returned, matched to its call by id (by name, the latest
        unanswered call of that name, when the tool wrote no id)."""
        call_id = str(call_id) if call_id else None
        name = str(name) if name else None
        if call_id not in self._calls and name:
            call_id = next(
                (
                    ident
                    for ident, part in reversed(self._calls.items())
                    if part.name == name and ident not in self._answered
                ),
                call_id,
            )
        call = self._calls.get(call_id or "")
        ident = call_id or self._made_up_id()
        self._answered.add(ident)
        tool = name or (call.name if call else "tool")
        content = text_of(output)
        part = ToolResultPart(tool_call_id=ident, name=tool, content=content, is_error=is_error)
        self.messages.append(SessionMessage(role="tool", parts=[part], timestamp=at))
        self._open = None
        started = self._call_times.get(ident)
        duration = None
        if started is not None:
            delta = (parse_iso(at) - parse_iso(started)).total_seconds() * 1000
            duration = delta if delta >= 0 else None
        self.tool_calls.append(
            SessionToolCall(
                id=ident,
                name=tool,
                args=call.args if call else {},
                result=ToolResult(llm_content=content),
                timestamp=started or at,
                duration_ms=duration,
                success=not is_error,
                error=content[:500] if is_error else None,
            )
        )

    def _made_up_id(self) -> str:
        self._made_up += 1
        return f"imported_call_{self._made_up}"

    def _append(self, role: Literal["user", "assistant", "system"], part: Any, at: str) -> None:
        """A part joins the open message of its role, or starts a message."""
        current = self._open
        joins = (
            current is not None
            and self.messages
            and self.messages[-1] is current
            and current.role == role
            and not (
                not self.marks_replies
                and isinstance(part, ThinkingPart)
                and any(not isinstance(p, ThinkingPart) for p in current.parts)
            )
        )
        if joins and current is not None:
            current.parts.append(part)
            return
        message = SessionMessage(role=role, parts=[part], timestamp=at)
        self.messages.append(message)
        self._open = message

    def build(self) -> Session | None:
        """The session, or ``None`` when the conversation held no message."""
        if not self.messages:
            return None
        first = min((m.timestamp for m in self.messages), key=parse_iso)
        last = max((m.timestamp for m in self.messages), key=parse_iso)
        if self.started is not None and parse_iso(self.started) < parse_iso(first):
            first = self.started  # the tool's own start (Codex's header) comes first
        custom = {
            "importedFrom": {
                "tool": self.source,
                "id": self.source_id,
                "path": str(self.path),
                **self.extra,
            }
        }
        metadata = SessionMetadata(
            working_dir=self.working_dir,
            title=self.title,
            title_source="auto" if self.title else None,
            notes=self.notes,
            custom=custom,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            thinking_tokens=self.thinking_tokens,
            token_count=self.prompt_tokens + self.completion_tokens,
            tags=[f"imported:{self.source}"],
        )
        return Session(
            session_id=imported_session_id(self.source, self.source_id),
            start_time=first,
            last_activity=last,
            model=self.model or "unknown",
            provider=self.source,
            messages=self.messages,
            tool_calls=self.tool_calls,
            metadata=metadata,
        )
