"""Rendering a :class:`~ollm_cli.pipeline.records.Session` for people and for other programs.

Three formats, all pure functions of the session:

- JSON in the spec's file format (what ``ollm sessions import`` reads back),
- Markdown (readable as plain text, renders nicely on any forge),
- one self-contained HTML file: inline CSS, every piece of content escaped, no
  script, no external reference, and a Content-Security-Policy that forbids
  loading anything should a browser be tempted.

All of them go through :func:`transcript`, which pairs each tool call with its
result (from the tool message that answered it, or from ``toolCalls``) so that a
reader sees the call, its arguments and what came back in one place. Nothing is
ever truncated here (reasoning included: whole, folded in HTML): ``ollm sessions
view`` shortens long tool results on screen unless ``--full``, exports never do.
An interrupted answer is marked so in every format. Markdown goes through
:func:`~ollm_cli.pipeline.markdown_text.inert_markdown`, so that no
raw HTML or ``javascript:`` link in a message runs where the file is rendered.

Example::

    from ollm_cli.pipeline.recording._export import ExportFormat, render
    text = render(session, ExportFormat.MARKDOWN)
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator
from datetime import UTC
from enum import StrEnum
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from ollm_cli.pipeline.markdown_text import (
    code_span,
    fenced,
    inert_inline,
    inert_markdown,
)
from ollm_cli.pipeline.records import (
    CompressionEvent,
    ImagePart,
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    parse_iso,
)
from ollm_cli.pipeline.terminal_text import strip_control


class ExportFormat(StrEnum):
    """The formats ``ollm sessions export`` writes."""

    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"


class ToolCallView(BaseModel):
    """A tool call with everything known about it: arguments, result, outcome.

    ``args`` is ``None`` when only the result was recorded (a tool message whose
    call is missing); ``result`` is ``None`` when the call never got an answer.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    args: dict[str, Any] | None = None
    result: str | None = None
    display: str | None = None
    is_error: bool = False
    error: str | None = None
    duration_ms: float | None = None


class TextBlock(BaseModel):
    """Text of a message, as written."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["text"] = "text"
    text: str


class ToolBlock(BaseModel):
    """A tool call and its result."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["tool"] = "tool"
    call: ToolCallView


class ThinkingBlock(BaseModel):
    """The reasoning a thinking model gave, whole; ``tokens`` when it was counted."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["thinking"] = "thinking"
    text: str
    tokens: int | None = None

    @property
    def label(self) -> str:
        """``reasoning (120 tokens)``, or its size in characters when not counted."""
        size = f"{self.tokens} tokens" if self.tokens else f"{len(self.text)} characters"
        return f"reasoning ({size})"


class NoteBlock(BaseModel):
    """A part that is not text: an image reference, a part of an unknown type."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["note"] = "note"
    text: str


Block = TextBlock | ThinkingBlock | ToolBlock | NoteBlock


class TranscriptEntry(BaseModel):
    """One message of the conversation (or a tool call recorded on its own).

    ``interrupted``: the answer was cut off (Ctrl-C, a crash mid-answer) and holds
    only the part that was shown; every view and export says so."""

    model_config = ConfigDict(frozen=True)

    role: str
    timestamp: str
    blocks: list[Block] = Field(default_factory=list)
    interrupted: bool = False


INTERRUPTED_NOTE = "interrupted: the answer stopped here; only the part shown was recorded"
"""What every view and export says at the end of an interrupted answer."""


def token_limit_mark(message: SessionMessage) -> str | None:
    """What views and exports say after an answer the provider stopped at its output
    limit (``finishReason: "length"``), so it does not end mid-sentence in silence.

    >>> token_limit_mark(SessionMessage.model_validate(
    ...     {"role": "assistant", "parts": [], "finishReason": "length", "tokenLimit": 256}))
    'answer cut at the token limit (256 tokens)'
    """
    from ollm_cli.pipeline.providers import cut_at_token_limit, recorded_token_limit

    if not cut_at_token_limit(message):
        return None
    limit = recorded_token_limit(message)
    return f"answer cut at the token limit{f' ({limit} tokens)' if limit is not None else ''}"


def _entry_of(message: SessionMessage, blocks: list[Block]) -> TranscriptEntry:
    mark = token_limit_mark(message)
    return TranscriptEntry(
        role=message.role,
        timestamp=message.timestamp,
        blocks=[*blocks, NoteBlock(text=mark)] if mark else blocks,
        interrupted=(message.model_extra or {}).get("interrupted") is True,
    )


def format_timestamp(value: str) -> str:
    """A stored ISO 8601 timestamp as ``2026-11-20 09:00:05 UTC``."""
    try:
        moment = parse_iso(value)
    except ValueError:
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_args(args: dict[str, Any]) -> str:
    """Tool arguments as indented JSON (values JSON cannot hold are shown with ``str``)."""
    return orjson.dumps(
        args, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    ).decode()


def _view_of_call(
    call_id: str,
    name: str,
    args: dict[str, Any] | None,
    result_part: ToolResultPart | None,
    recorded: SessionToolCall | None,
) -> ToolCallView:
    result: str | None = None
    display: str | None = None
    if result_part is not None:
        result = result_part.content
    if recorded is not None:
        if result is None:
            result = recorded.result.llm_content
        shown = recorded.result.return_display
        display = shown if shown and shown != result else None
        if args is None:
            args = recorded.args
    is_error = bool(
        (result_part is not None and result_part.is_error)
        or (recorded is not None and (recorded.success is False or recorded.error))
    )
    return ToolCallView(
        id=call_id,
        name=name,
        args=args,
        result=result,
        display=display,
        is_error=is_error,
        error=recorded.error if recorded is not None else None,
        duration_ms=recorded.duration_ms if recorded is not None else None,
    )


def _note_for(part: Any) -> str:
    if isinstance(part, ImagePart):
        where = part.path or part.url or "no location recorded"
        kind = f", {part.mime_type}" if part.mime_type else ""
        return f"image: {where}{kind}"
    return f"a part of type {getattr(part, 'type', '?')!r} this version does not display"


def _blocks_of(
    message: SessionMessage,
    called_ids: set[str],
    results: dict[str, ToolResultPart],
    recorded: dict[str, SessionToolCall],
) -> list[Block]:
    blocks: list[Block] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            blocks.append(TextBlock(text=part.text))
        elif isinstance(part, ThinkingPart):
            blocks.append(ThinkingBlock(text=part.text, tokens=part.tokens))
        elif isinstance(part, ToolCallPart):
            view = _view_of_call(
                part.id, part.name, part.args, results.get(part.id), recorded.get(part.id)
            )
            blocks.append(ToolBlock(call=view))
        elif isinstance(part, ToolResultPart):
            if part.tool_call_id in called_ids:
                continue  # shown with its call
            view = _view_of_call(
                part.tool_call_id, part.name, None, part, recorded.get(part.tool_call_id)
            )
            blocks.append(ToolBlock(call=view))
        else:
            blocks.append(NoteBlock(text=_note_for(part)))
    return blocks


def transcript(session: Session) -> list[TranscriptEntry]:
    """The conversation in order, each tool call paired with its result.

    A tool message whose results are all shown with their calls disappears; a
    call recorded only in ``toolCalls`` becomes an entry of its own, placed by
    its timestamp.
    """
    called_ids = {p.id for m in session.messages for p in m.parts if isinstance(p, ToolCallPart)}
    results: dict[str, ToolResultPart] = {}
    for message in session.messages:
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                results.setdefault(part.tool_call_id, part)
    recorded: dict[str, SessionToolCall] = {}
    for call in session.tool_calls:
        recorded.setdefault(call.id, call)

    entries: list[TranscriptEntry] = []
    for message in session.messages:
        blocks = _blocks_of(message, called_ids, results, recorded)
        if blocks or message.role != "tool":
            entries.append(_entry_of(message, blocks))

    for call in session.tool_calls:
        if call.id in called_ids or call.id in results or recorded[call.id] is not call:
            continue
        entry = TranscriptEntry(
            role="tool",
            timestamp=call.timestamp,
            blocks=[ToolBlock(call=_view_of_call(call.id, call.name, call.args, None, call))],
        )
        moment = parse_iso(call.timestamp)
        at = len(entries)
        while at > 0 and parse_iso(entries[at - 1].timestamp) > moment:
            at -= 1
        entries.insert(at, entry)
    return entries


class CompressionMark(BaseModel):
    """A compression shown where it happened in a transcript (see
    :func:`with_compression_marks`), numbered as ``compressionCount`` counts them."""

    model_config = ConfigDict(frozen=True)

    number: int
    event: CompressionEvent


def with_compression_marks(
    header: Session, entries: Iterable[TranscriptEntry]
) -> Iterator[TranscriptEntry | CompressionMark]:
    """``entries`` with a :class:`CompressionMark` for each compression of the header's
    ``metadata.compressionHistory``, after the entries older than it (by time), one
    entry at a time (a streamed session is never held whole). A restored snapshot is
    shown but not counted."""
    marks: list[CompressionMark] = []
    number = 0
    for event in sorted(header.metadata.compression_history, key=lambda e: e.timestamp):
        if event.trigger != "restore":
            number += 1
        marks.append(CompressionMark(number=number, event=event))
    pending = iter(marks)
    mark = next(pending, None)
    for entry in entries:
        moment = parse_iso(entry.timestamp)
        while mark is not None and parse_iso(mark.event.timestamp) < moment:
            yield mark
            mark = next(pending, None)
        yield entry
    while mark is not None:
        yield mark
        mark = next(pending, None)


def describe_compression(mark: CompressionMark) -> str:
    """One line about a compression: what was done, tokens before and after, why
    it fell back, and which messages its checkpoint stands for."""
    event = mark.event
    if event.trigger == "restore":
        head = "Snapshot restored"
    else:
        how = event.strategy
        if event.trigger:
            how += f", {event.trigger}"
        head = f"Compression {mark.number} ({how})"
    line = f"{head}: {event.tokens_before} → {event.tokens_after} tokens"
    if event.fallback:
        line += f"; fell back to {event.strategy}: {event.fallback}"
    if event.focus:
        line += f"; focus: {event.focus}"
    checkpoint = event.checkpoint
    if checkpoint is not None and checkpoint.covers_through:
        kept = sum(1 for item in checkpoint.head if isinstance(item, int))
        line += f"; stands for messages 1-{checkpoint.covers_through}"
        if kept:
            line += f" ({kept} kept verbatim)"
    return _one_line(line)


def compression_summary(event: CompressionEvent) -> str | None:
    """The summary text of a compression's checkpoint, if it has one."""
    return event.checkpoint.summary if event.checkpoint is not None else None


STREAM_WINDOW = 64
"""How many messages after a tool call :func:`iter_transcript` looks ahead for its result."""


def iter_transcript(
    messages: Iterable[SessionMessage],
    *,
    result_ids: set[str],
    recorded: dict[str, SessionToolCall],
    orphans: list[SessionToolCall],
) -> Iterator[TranscriptEntry]:
    """:func:`transcript` of a session read message by message, in bounded memory.

    A message with tool calls waits for the messages holding their results (at
    most :data:`STREAM_WINDOW` of them), so each call is shown with its result;
    a result that comes later than that is shown on its own. ``orphans`` (calls
    recorded only in ``toolCalls``, by time) are placed by their timestamps.
    """
    pending = sorted(orphans, key=lambda c: parse_iso(c.timestamp))
    held: list[SessionMessage] = []
    waiting: set[str] = set()
    results: dict[str, ToolResultPart] = {}
    attached: set[str] = set()

    def entries_of(batch: list[SessionMessage]) -> Iterator[TranscriptEntry]:
        for message in batch:
            moment = parse_iso(message.timestamp)
            while pending and parse_iso(pending[0].timestamp) <= moment:
                yield _orphan_entry(pending.pop(0))
            blocks = _blocks_of(message, attached, results, recorded)
            if blocks or message.role != "tool":
                yield _entry_of(message, blocks)

    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.tool_call_id in waiting:
                results.setdefault(part.tool_call_id, part)
                waiting.discard(part.tool_call_id)
                attached.add(part.tool_call_id)
        new_calls = {
            p.id for p in message.parts if isinstance(p, ToolCallPart) and p.id in result_ids
        }
        if held or new_calls:
            held.append(message)
            waiting |= new_calls - attached
            if not waiting or len(held) >= STREAM_WINDOW:
                yield from entries_of(held)
                held, waiting = [], set()
                results.clear()
                attached.clear()
        else:
            yield from entries_of([message])
    yield from entries_of(held)
    for call in pending:
        yield _orphan_entry(call)


def _orphan_entry(call: SessionToolCall) -> TranscriptEntry:
    return TranscriptEntry(
        role="tool",
        timestamp=call.timestamp,
        blocks=[ToolBlock(call=_view_of_call(call.id, call.name, call.args, None, call))],
    )


def session_heading(session: Session) -> str:
    """The session's title on one line, or ``Session 3f1c2a9e`` when it has none."""
    title = " ".join((session.metadata.title or "").split())
    return title or f"Session {session.session_id[:8]}"


def session_facts(
    session: Session, *, messages: int | None = None, tool_calls: int | None = None
) -> list[tuple[str, str]]:
    """The metadata worth showing above a transcript, as ``(label, value)`` pairs
    (``messages``/``tool_calls``: the counts of a session streamed, not held)."""
    meta = session.metadata
    facts = [
        ("Session", session.session_id),
        ("Model", f"{session.model} ({session.provider})" if session.provider else session.model),
        ("Started", format_timestamp(session.start_time)),
        ("Last activity", format_timestamp(session.last_activity)),
        ("Messages", str(len(session.messages) if messages is None else messages)),
        ("Tool calls", str(len(session.tool_calls) if tool_calls is None else tool_calls)),
    ]
    tokens = f"{meta.token_count}"
    if meta.prompt_tokens or meta.completion_tokens:
        tokens += f" (prompt {meta.prompt_tokens}, completion {meta.completion_tokens})"
    facts.append(("Tokens", tokens))
    if meta.working_dir:
        facts.append(("Working directory", meta.working_dir))
    if meta.tags:
        facts.append(("Tags", ", ".join(meta.tags)))
    if meta.pinned:
        facts.append(("Pinned", "yes"))
    if meta.compression_count or meta.compression_history:
        count = max(meta.compression_count, len(meta.compression_history))
        facts.append(
            ("Compressions", f"{count} (in the model's context only; this file is complete)")
        )
    if meta.notes:
        facts.append(("Notes", meta.notes))
    origin = (meta.model_extra or {}).get("forkedFrom")
    if isinstance(origin, dict) and isinstance(origin.get("sessionId"), str):
        facts.append(
            ("Forked from", f"{origin['sessionId'][:8]} at message {origin.get('messageIndex')}")
        )
    return facts


def call_outcome(call: ToolCallView) -> str:
    """``ok``, ``error``, or ``no result recorded``, with the duration when known."""
    if call.result is None and not call.is_error:
        outcome = "no result recorded"
    else:
        outcome = "error" if call.is_error else "ok"
    if call.duration_ms is not None:
        outcome += f", {call.duration_ms:g} ms"
    return outcome


def to_json(session: Session) -> str:
    """The session in the spec's file format: what ``ollm sessions import`` reads."""
    return session.to_json().decode() + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _markdown_call(call: ToolCallView) -> str:
    out = [f"**Tool call** {code_span(_one_line(call.name))} (id {code_span(_one_line(call.id))}, "]
    out[0] += f"{call_outcome(call)})\n\n"
    if call.args is not None:
        out.append("Arguments:\n\n" + fenced(format_args(call.args), "json") + "\n")
    if call.error:
        out.append("Error:\n\n" + fenced(call.error, "text") + "\n")
    if call.result is not None:
        out.append("Result:\n\n" + fenced(call.result, "text") + "\n")
    if call.display:
        out.append("Shown to the user:\n\n" + fenced(call.display, "text") + "\n")
    return "".join(out)


def to_markdown(session: Session) -> str:
    """The whole session as Markdown: a facts list, then every message and tool call,
    and a quoted line where each compression happened."""
    pieces = _markdown_pieces(session, transcript(session), session_facts(session))
    return "".join(_ending_in_one_newline(pieces))


def _markdown_mark(mark: CompressionMark) -> str:
    line = inert_inline(describe_compression(mark))
    text = f"---\n\n> **{line}** · {format_timestamp(mark.event.timestamp)}\n"
    summary = compression_summary(mark.event)
    if summary:
        text += ">\n" + _ending_in_newline(inert_markdown(summary, quote=True))
    return text + "\n"


def _ending_in_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _markdown_thinking(block: ThinkingBlock) -> str:
    """Reasoning whole, in a block quote under its label (fenced if it must be)."""
    shown = inert_markdown(block.text, quote=True)
    return f"_{block.label}:_\n\n" + _ending_in_newline(shown) + "\n"


_CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --muted: #656d76;
  --line: #d0d7de; --user: #ddf4ff; --assistant: #f6f8fa; --system: #fff8c5;
  --tool: #fbefff; --error: #cf222e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117;
  --muted: #8d96a0; --line: #30363d; --user: #0c2d48; --assistant: #161b22;
  --system: #3b2e00; --tool: #2a1a3a; --error: #ff7b72; } }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg);
  max-width: 58rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .5rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem;
  color: var(--muted); margin: 0 0 2rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; white-space: pre-wrap; }
article { border: 1px solid var(--line); border-radius: 8px; margin: 1rem 0;
  padding: .6rem .9rem; }
article.user { background: var(--user); } article.assistant { background: var(--assistant); }
article.system { background: var(--system); } article.tool { background: var(--tool); }
article > header { display: flex; justify-content: space-between; font-weight: 600;
  margin-bottom: .4rem; }
article > header time { font-weight: 400; color: var(--muted); font-size: .85rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
.note { color: var(--muted); font-style: italic; }
details { border-left: 3px solid var(--line); margin: .5rem 0; padding: .2rem .6rem; }
details.error { border-left-color: var(--error); }
summary { cursor: pointer; } summary code { font-weight: 600; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: rgba(127,127,127,.1);
  padding: .5rem; border-radius: 6px; margin: .3rem 0; font-size: .85rem; }
.label { color: var(--muted); font-size: .8rem; margin-top: .4rem; }
.interrupted { color: var(--error); font-weight: 600; }
article.interrupted { border-color: var(--error); border-style: dashed; }
aside.compression { border: 1px dashed var(--line); border-radius: 8px; margin: 1rem 0;
  padding: .4rem .9rem; color: var(--muted); }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'none'"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _html_call(call: ToolCallView) -> str:
    css = "tool error" if call.is_error else "tool"
    out = [
        f'<details class="{css}" open><summary><code>{_esc(call.name)}</code> '
        f"<span>({_esc(call.id)}, {_esc(call_outcome(call))})</span></summary>"
    ]
    if call.args is not None:
        out.append(f'<div class="label">arguments</div><pre>{_esc(format_args(call.args))}</pre>')
    if call.error:
        out.append(f'<div class="label">error</div><pre>{_esc(call.error)}</pre>')
    if call.result is not None:
        out.append(f'<div class="label">result</div><pre>{_esc(call.result)}</pre>')
    if call.display:
        out.append(f'<div class="label">shown to the user</div><pre>{_esc(call.display)}</pre>')
    out.append("</details>")
    return "".join(out)


_ROLE_CLASSES = {"user", "assistant", "system", "tool"}


def to_html(session: Session) -> str:
    """The whole session as one HTML file that needs nothing else to display."""
    return "".join(html_chunks(session, transcript(session), session_facts(session)))


def _html_mark(mark: CompressionMark) -> str:
    summary = compression_summary(mark.event)
    body = f'<pre class="summary">{_esc(summary)}</pre>' if summary else ""
    return (
        f'<aside class="compression"><details{" open" if summary else ""}><summary>'
        f"{_esc(describe_compression(mark))} · "
        f'<time datetime="{_esc(mark.event.timestamp)}">'
        f"{_esc(format_timestamp(mark.event.timestamp))}</time></summary>{body}</details></aside>\n"
    )


def markdown_chunks(
    header: Session, entries: Iterable[TranscriptEntry], facts: list[tuple[str, str]]
) -> Iterator[str]:
    """:func:`to_markdown` piece by piece, for a session streamed entry by entry
    (control sequences stripped from each piece, as from the whole)."""
    pieces = _ending_in_one_newline(_markdown_pieces(header, entries, facts))
    return (strip_control(piece) for piece in pieces)


def _markdown_pieces(
    header: Session, entries: Iterable[TranscriptEntry], facts: list[tuple[str, str]]
) -> Iterator[str]:
    yield f"# {inert_inline(session_heading(header))}\n\n"
    yield ("".join(f"- **{label}:** {inert_inline(value)}\n" for label, value in facts) + "\n")
    for entry in with_compression_marks(header, entries):
        if isinstance(entry, CompressionMark):
            yield _markdown_mark(entry)
            continue
        heading = f"{entry.role.capitalize()} · {format_timestamp(entry.timestamp)}"
        if entry.interrupted:
            heading += " · interrupted"
        out = [f"---\n\n## {heading}\n\n"]
        for block in entry.blocks:
            if isinstance(block, TextBlock):
                text = inert_markdown(block.text)
                out.append(text + ("\n\n" if not text.endswith("\n") else "\n"))
            elif isinstance(block, ThinkingBlock):
                out.append(_markdown_thinking(block))
            elif isinstance(block, ToolBlock):
                out.append(_markdown_call(block.call))
            else:
                out.append(f"_({inert_inline(block.text)})_\n\n")
        if entry.interrupted:
            out.append(f"**⚠ {INTERRUPTED_NOTE}**\n\n")
        yield "".join(out)


def _ending_in_one_newline(pieces: Iterable[str]) -> Iterator[str]:
    """``"".join(pieces).rstrip("\\n") + "\\n"``, without joining them."""
    held = ""
    for piece in pieces:
        body = piece.rstrip("\n")
        if body:
            yield held + body
            held = piece[len(body) :]
        else:
            held += piece
    yield "\n"


def html_chunks(
    header: Session, entries: Iterable[TranscriptEntry], facts: list[tuple[str, str]]
) -> Iterator[str]:
    """:func:`to_html` piece by piece, for a session streamed entry by entry."""
    heading = _esc(session_heading(header))
    yield (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="ollm sessions export">\n'
        f"<title>{heading}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f'<h1>{heading}</h1>\n<dl class="facts">\n'
    )
    yield "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>\n" for k, v in facts)
    yield "</dl>\n<main>\n"
    for entry in with_compression_marks(header, entries):
        if isinstance(entry, CompressionMark):
            yield _html_mark(entry)
            continue
        role_class = entry.role if entry.role in _ROLE_CLASSES else "other"
        role = _esc(entry.role.capitalize())
        if entry.interrupted:
            role_class += " interrupted"
            role += ' <span class="interrupted">· interrupted</span>'
        out = [
            f'<article class="{role_class}"><header><span>{role}'
            f'</span><time datetime="{_esc(entry.timestamp)}">'
            f"{_esc(format_timestamp(entry.timestamp))}</time></header>\n"
        ]
        for block in entry.blocks:
            if isinstance(block, TextBlock):
                out.append(f'<div class="text">{_esc(block.text)}</div>\n')
            elif isinstance(block, ThinkingBlock):
                out.append(
                    f'<details class="thinking"><summary>{_esc(block.label)}</summary>'
                    f'<div class="text">{_esc(block.text)}</div></details>\n'
                )
            elif isinstance(block, ToolBlock):
                out.append(_html_call(block.call) + "\n")
            else:
                out.append(f'<div class="note">{_esc(block.text)}</div>\n')
        if entry.interrupted:
            out.append(f'<div class="interrupted">⚠ {_esc(INTERRUPTED_NOTE)}</div>\n')
        out.append("</article>\n")
        yield "".join(out)
    yield "</main>\n</body>\n</html>\n"


def json_chunks(
    header: Session, messages: Iterable[dict[str, Any]], tool_calls: Iterable[dict[str, Any]]
) -> Iterator[str]:
    """The spec's file format piece by piece (importable), for a streamed session."""
    data = header.to_dict()
    data.pop("messages", None)
    data.pop("toolCalls", None)
    metadata = data.pop("metadata", {})
    head = orjson.dumps(data).decode()
    yield head[:-1] + (', "messages": [' if len(head) > 2 else '"messages": [')
    for n, message in enumerate(messages):
        yield ("," if n else "") + "\n" + orjson.dumps(message, default=_number).decode()
    yield '\n], "toolCalls": ['
    for n, call in enumerate(tool_calls):
        yield ("," if n else "") + "\n" + orjson.dumps(call, default=_number).decode()
    yield '\n], "metadata": ' + orjson.dumps(metadata).decode() + "}\n"


def _number(value: Any) -> Any:
    """ijson's Decimal numbers (when a float did not fit), as JSON numbers."""
    return float(value)


def render(session: Session, fmt: ExportFormat) -> str:
    """The session in ``fmt``: the text ``ollm sessions export`` writes."""
    if fmt is ExportFormat.JSON:
        return to_json(session)
    if fmt is ExportFormat.MARKDOWN:
        # a hostile answer or imported title must not reach a terminal that shows the file
        return strip_control(to_markdown(session))
    return to_html(session)
