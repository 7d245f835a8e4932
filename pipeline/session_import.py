"""Importing sessions recorded by other tools: Claude Code, Codex, Gemini CLI and llm.

Each tool's reader (``pipeline/import_claude_code.py``, ``import_codex.py``,
``import_gemini.py``, ``import_llm.py``) turns its files into :class:`Session`
records through a :class:`SessionBuilder`: messages with their text, reasoning,
tool calls (name, arguments) and tool results, timestamps, the model and the
working folder. ``metadata.custom.importedFrom`` keeps the tool, its own id of
the session and the file; the session's id is derived from the tool and that
id (a UUID5), so importing the same thing twice finds it already there and
creates nothing new.

A file that is not what it claims raises :class:`ImportFormatError`, whose
message names the file and the line (or the table row) and what was expected.
Text in imported files is data: it is stored and shown, never obeyed.

Example::

    sessions = read_sessions(Path("~/.codex/sessions").expanduser(), source="codex")
    sessions[0].metadata.custom["importedFrom"]   # {"tool": "codex", "id": "…", "path": "…"}
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.records import (
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


def imported_session_id(source: str, source_id: str) -> str:
    """The OLLM id of the session ``source`` calls ``source_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{source}:{source_id}"))


def iso_time(value: Any, fallback: str | None = None) -> str:
    """``value`` (ISO text, or seconds or milliseconds since 1970) as an ISO timestamp."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 10**11 else value
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, str) and value:
        try:
            parse_iso(value.replace(" ", "T", 1) if "T" not in value else value)
        except ValueError:
            pass
        else:
            return value.replace(" ", "T", 1) if "T" not in value else value
    return fallback or now_iso()


def json_lines(path: Path, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-empty line of a JSONL file."""
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
            raise bad_file(path, f"line {number}", f"not JSON ({exc.msg})", source) from None
        if not isinstance(value, dict):
            raise bad_file(
                path, f"line {number}", f"a {type(value).__name__}, not a JSON object", source
            )
        yield number, value


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
        for key in ("text", "output", "content"):
            if isinstance(value.get(key), str | list):
                return text_of(value[key])
    return orjson.dumps(value).decode()


def arguments(value: Any) -> dict[str, Any]:
    """Tool-call arguments as a mapping (JSON text is parsed; anything else is wrapped)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


@dataclass
class SessionBuilder:
    """Collects one imported conversation in order and makes it a :class:`Session`."""

    source: ImportSource
    source_id: str
    path: Path
    model: str = ""
    working_dir: str | None = None
    title: str | None = None
    messages: list[SessionMessage] = field(default_factory=list)
    tool_calls: list[SessionToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    thinking_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    _calls: dict[str, ToolCallPart] = field(default_factory=dict)
    _call_times: dict[str, str] = field(default_factory=dict)
    _answered: set[str] = field(default_factory=set)

    def say(self, role: Literal["user", "assistant", "system"], text: str, at: str) -> None:
        """A message of plain text (empty text is skipped)."""
        if text.strip():
            self._append(role, TextPart(text=text), at)

    def think(self, text: str, at: str, tokens: int | None = None) -> None:
        """Reasoning the assistant showed before answering."""
        if text.strip():
            self._append("assistant", ThinkingPart(text=text, tokens=tokens), at)

    def call(self, call_id: str | None, name: str, args: Any, at: str) -> str:
        """The assistant called a tool; returns the call's id (made up when it had none)."""
        ident = call_id or f"call_{uuid.uuid4().hex[:16]}"
        part = ToolCallPart(id=ident, name=name or "tool", args=arguments(args))
        self._calls[ident] = part
        self._call_times[ident] = at
        self._append("assistant", part, at)
        return ident

    def result(
        self,
        call_id: str | None,
        output: Any,
        at: str,
        *,
        name: str | None = None,
        is_error: bool = False,
    ) -> None:
        """What a tool returned, matched to its call by id (by name, the latest
        unanswered call of that name, when the tool wrote no id)."""
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
        ident = call_id or f"call_{uuid.uuid4().hex[:16]}"
        self._answered.add(ident)
        tool = name or (call.name if call else "tool")
        content = text_of(output)
        part = ToolResultPart(tool_call_id=ident, name=tool, content=content, is_error=is_error)
        self.messages.append(SessionMessage(role="tool", parts=[part], timestamp=at))
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

    def _append(self, role: Literal["user", "assistant", "system"], part: Any, at: str) -> None:
        """Parts of one turn of the same role join the message before them."""
        last = self.messages[-1] if self.messages else None
        joins = (
            last is not None
            and last.role == role
            and role == "assistant"
            and not (isinstance(part, ThinkingPart) and last.tool_calls)
        )
        if joins and last is not None:
            last.parts.append(part)
        else:
            self.messages.append(SessionMessage(role=role, parts=[part], timestamp=at))

    def build(self) -> Session | None:
        """The session, or ``None`` when the conversation held no message."""
        if not self.messages:
            return None
        times = sorted(self.messages, key=lambda m: parse_iso(m.timestamp))
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
            custom=custom,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            thinking_tokens=self.thinking_tokens,
            token_count=self.prompt_tokens + self.completion_tokens,
            tags=[f"imported:{self.source}"],
        )
        return Session(
            session_id=imported_session_id(self.source, self.source_id),
            start_time=times[0].timestamp,
            last_activity=times[-1].timestamp,
            model=self.model or "unknown",
            provider=self.source,
            messages=self.messages,
            tool_calls=self.tool_calls,
            metadata=metadata,
        )


# -- finding and recognising files -------------------------------------------------------------


def default_location(source: ImportSource, env: dict[str, str] | None = None) -> Path:
    """Where ``source`` keeps its sessions on this machine."""
    environ = dict(os.environ) if env is None else env
    home = Path(environ.get("HOME") or Path.home())
    if source == "claude-code":
        base = environ.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else home / ".claude") / "projects"
    if source == "codex":
        base = environ.get("CODEX_HOME")
        return (Path(base) if base else home / ".codex") / "sessions"
    if source == "gemini":
        return home / ".gemini" / "tmp"
    base = environ.get("LLM_USER_PATH")
    if base:
        return Path(base) / "logs.db"
    config = environ.get("XDG_CONFIG_HOME")
    return (Path(config) if config else home / ".config") / "io.datasette.llm" / "logs.db"


def detect_source(path: Path) -> ImportSource | Literal["ollm"] | None:
    """The tool that wrote ``path``, from its first bytes (``None``: none we know)."""
    try:
        with path.open("rb") as stream:
            head = stream.read(65536)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return "llm"
    first_line = head.split(b"\n", 1)[0].strip()
    try:
        first = orjson.loads(first_line) if first_line else None
    except orjson.JSONDecodeError:
        first = None
    if isinstance(first, dict) and path.suffix == ".jsonl":
        if "payload" in first or ({"id", "timestamp"} <= first.keys() and "type" not in first):
            return "codex"
        if first.get("type") in {"response_item", "session_meta", "turn_context", "event_msg"}:
            return "codex"
        return "claude-code"
    if path.suffix != ".json":
        return None
    try:
        whole = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if isinstance(whole, dict) and "projectHash" in whole and "messages" in whole:
        return "gemini"
    if isinstance(whole, list) and all(isinstance(i, dict) and "parts" in i for i in whole):
        return "gemini"
    if isinstance(whole, dict) and "sessionId" in whole and "provider" in whole:
        return "ollm"
    return None


_PATTERNS: dict[ImportSource, tuple[str, ...]] = {
    "claude-code": ("*.jsonl",),
    "codex": ("rollout-*.jsonl", "*.jsonl"),
    "gemini": ("session-*.json", "checkpoint-*.json"),
    "llm": ("logs.db", "*.db"),
}


def files_under(path: Path, source: ImportSource | None) -> list[Path]:
    """The files of ``source`` in folder ``path`` (every recognised file without a source)."""
    if path.is_file():
        return [path]
    if source is not None:
        found = {p for pattern in _PATTERNS[source] for p in path.rglob(pattern) if p.is_file()}
        if source == "claude-code":  # the sub-agent transcripts belong to their session
            found = {p for p in found if "subagents" not in p.parts}
        return sorted(found)
    candidates = [
        p
        for p in path.rglob("*")
        if p.is_file() and p.suffix in {".jsonl", ".json", ".db"} and "subagents" not in p.parts
    ]
    return sorted(p for p in candidates if detect_source(p) not in (None, "ollm"))


Reader = Callable[[Path], list[Session]]


def reader_for(source: ImportSource) -> Reader:
    """The reader of ``source``'s files."""
    if source == "claude-code":
        from ollm_cli.pipeline.import_claude_code import read_claude_code

        return read_claude_code
    if source == "codex":
        from ollm_cli.pipeline.import_codex import read_codex

        return read_codex
    if source == "gemini":
        from ollm_cli.pipeline.import_gemini import read_gemini

        return read_gemini
    from ollm_cli.pipeline.import_llm import read_llm

    return read_llm


def read_sessions(path: Path, source: ImportSource | None = None) -> list[tuple[Path, Session]]:
    """Every session in ``path`` (a file or a folder), each with the file it came from."""
    if not path.exists():
        raise SessionError(
            f"{path} does not exist",
            hint="give a file or folder of the tool's sessions, or leave the path out to read "
            "the tool's default location",
        )
    out: list[tuple[Path, Session]] = []
    for file in files_under(path, source):
        kind = source or detect_source(file)
        if kind is None or kind == "ollm":
            raise ImportFormatError(
                f"{file}: line 1: not a session of Claude Code, Codex, Gemini CLI or llm",
                hint="name the tool with --from, or import OLLM session files without --from",
            )
        out.extend((file, session) for session in reader_for(kind)(file))
    return out
