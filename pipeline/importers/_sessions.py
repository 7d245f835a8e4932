"""Importing sessions recorded by other tools: Claude Code, Codex, Gemini CLI and llm.

Each tool's reader (``importers/_claude_code.py``, ``_codex.py``,
``_gemini.py``, ``_llm.py``) reads its files (``_reading.py``) and turns them
into :class:`Session` records through a :class:`SessionBuilder`: messages
with their text, reasoning, tool calls (name, arguments) and tool results,
timestamps, the model and the working folder. ``metadata.custom.importedFrom``
keeps the tool, its own id of the session and the file; the session's id is
derived from the tool and that id (a UUID5), so importing the same thing twice
finds it already there and creates nothing new.

One message per reply, at the time the tool wrote for it (see
:class:`SessionBuilder`). Images become :class:`ImagePart` references (never
their bytes) and any other part that is not kept becomes a bracketed
placeholder text (``_content.py``), so that nothing vanishes silently. Text in
imported files is data: it is stored and shown, never obeyed.

Example::

    sessions = read_sessions(Path("~/.codex/sessions").expanduser(), source="codex")
    sessions[0].metadata.custom["importedFrom"]   # {"tool": "codex", "id": "…", "path": "…"}
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ollm_cli.pipeline.importers._content import arguments, placeholder_text, text_of
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
    parse_iso,
)

ImportSource = Literal["claude-code", "codex", "gemini", "llm"]
SOURCES: tuple[ImportSource, ...] = ("claude-code", "codex", "gemini", "llm")
_NAMESPACE = uuid.UUID("8f2b6c1e-3c1d-5a7e-9f4b-6d0c2e1a7b35")


def imported_session_id(source: str, source_id: str) -> str:
    """The OLLM id of the session ``source`` calls ``source_id`` (the same every time)."""
    return str(uuid.uuid5(_NAMESPACE, f"{source}:{source_id}"))


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
    skipped: dict[str, int] = field(default_factory=dict)
    """What was left out of the conversation on purpose, by reason, and how often."""
    _calls: dict[str, ToolCallPart] = field(default_factory=dict)
    _call_times: dict[str, str] = field(default_factory=dict)
    _answered: set[str] = field(default_factory=set)
    _waiting: list[str] = field(default_factory=list)
    _invented: set[str] = field(default_factory=set)
    _open: SessionMessage | None = None
    _made_up: int = 0

    def next_message(self) -> None:
        """The parts that follow begin a new message."""
        self._open = None

    def say(self, role: Literal["user", "assistant", "system"], text: str, at: str) -> None:
        """A message of plain text (empty text is skipped). The user's words close the
        turn: a call still waiting for its result then gets none by position."""
        if text.strip():
            self._append(role, TextPart(text=text), at)
            if role == "user":
                self._waiting.clear()

    def skip(self, reason: str) -> None:
        """Something of the file left out of the conversation on purpose (``reason``: what
        it was and why, e.g. ``"Gemini CLI info notices (…)"``), counted for the report."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

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
        if call_id:
            ident = str(call_id)
        else:
            ident = self._made_up_id()
            self._invented.add(ident)
        part = ToolCallPart(id=ident, name=name or "tool", args=arguments(args))
        self._calls[ident] = part
        self._call_times[ident] = at
        self._waiting.append(ident)
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
        """What a tool returned, matched to its call by id; when its id matches no call,
        by name (the latest unanswered call of that name), else by position: a result
        without an id answers the first call still waiting, and one whose id matches
        nothing the first waiting call the tool wrote no id for (Claude Code's calls and
        results come in order)."""
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
        if call_id not in self._calls:
            waiting = [i for i in self._waiting if call_id is None or i in self._invented]
            call_id = waiting[0] if waiting else call_id
        call = self._calls.get(call_id or "")
        ident = call_id or self._made_up_id()
        self._answered.add(ident)
        if ident in self._waiting:
            self._waiting.remove(ident)
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
        if self.skipped:
            custom["importedFrom"]["skipped"] = dict(self.skipped)
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
