"""Claude Code's project transcripts: ``~/.claude/projects/<folder>/<session id>.jsonl``.

One JSON object a line. The conversation's lines have ``type`` ``user`` or
``assistant`` and carry ``sessionId``, ``uuid``, ``parentUuid``, ``timestamp``,
``cwd`` and ``message`` (the Anthropic Messages API shape): a user's
``content`` is text or a list of blocks, among them ``tool_result`` blocks
(``tool_use_id``, ``content``, ``is_error``) that answer the assistant's
``tool_use`` blocks (``id``, ``name``, ``input``); an assistant's ``content``
holds ``text``, ``thinking`` and ``tool_use`` blocks, with ``model`` and
``usage``. A streamed answer is written a block a line, each line repeating
the message's ``id`` and usage: the lines of one id are one reply, timed at its
first line. ``summary`` lines give a title. Injected lines (``isMeta``) are not
the conversation; other line types (snapshots, queue operations) are skipped.

A sub-agent's conversation (``isSidechain`` lines, ``agentId``) is written to
its own file, ``<project>/<session id>/subagents/agent-<agent id>.jsonl``
(``<project>/agent-<agent id>.jsonl`` before Claude Code 2.1), whose
``sessionId`` is its parent's: it is imported as a session of its own, with a
note naming the parent session (``importedFrom.parent``); the
``agent-<agent id>.meta.json`` beside it (``agentType``, ``description``) gives
its title and kind. Sidechain lines in a main transcript are not its
conversation.

Images become image references; web searches are calls with their results;
other blocks (documents, redacted reasoning) become placeholders.

Example::

    transcript = Path("~/.claude/projects/-home-me-app/3f1c….jsonl").expanduser()
    [session] = read_claude_code(transcript, DamagedLines())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import orjson

from ollm_cli.pipeline.importers._content import (
    image_of,
    iso_time,
    placeholder_text,
    text_of,
    token_count,
)
from ollm_cli.pipeline.importers._reading import DamagedLines, bad_file, json_lines
from ollm_cli.pipeline.importers._sessions import SessionBuilder, imported_session_id
from ollm_cli.pipeline.records import Session

SOURCE: Final = "claude-code"
_NAME = "Claude Code"
_META_MAX_BYTES = 65536
_CONVERSATION = {"user", "assistant"}
_KNOWN = _CONVERSATION | {
    "summary",
    "system",
    "file-history-snapshot",
    "queue-operation",
    "progress",
    "attachment",
    "custom-title",
}


def read_claude_code(path: Path, damaged: DamagedLines) -> list[Session]:
    """The session of one transcript file (none when it holds no message)."""
    sidechain = path.name.startswith("agent-")
    builder = SessionBuilder(marks_replies=True, source=SOURCE, source_id=path.stem, path=path)
    usage: dict[str, tuple[int, int]] = {}
    recognised = False
    reply_id: str | None = None
    parent: str | None = None
    for number, line in json_lines(path, _NAME, damaged):
        kind = line.get("type")
        if not isinstance(kind, str) or kind not in _KNOWN:
            if not isinstance(kind, str):
                problem = "no Claude Code entry type"
                damaged.skip(number, bad_file(path, f"line {number}", problem, _NAME))
            continue
        recognised = True
        if kind == "summary" and isinstance(line.get("summary"), str):
            builder.title = builder.title or line["summary"]
            continue
        if kind == "custom-title" and isinstance(line.get("customTitle"), str):
            builder.title = line["customTitle"]
            continue
        if kind not in _CONVERSATION or line.get("isMeta"):
            continue
        if bool(line.get("isSidechain")) != sidechain:
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            problem = f"a {kind} entry without its message"
            damaged.skip(number, bad_file(path, f"line {number}", problem, _NAME))
            continue
        if isinstance(line.get("sessionId"), str):
            if sidechain:
                parent = line["sessionId"]
                agent = line.get("agentId")
                name = f"agent-{agent}" if isinstance(agent, str) and agent else path.stem
                builder.source_id = f"{parent}/{name}"
            else:
                builder.source_id = line["sessionId"]
        if isinstance(line.get("cwd"), str) and builder.working_dir is None:
            builder.working_dir = line["cwd"]
        at = iso_time(
            line.get("timestamp"), builder.messages[-1].timestamp if builder.messages else None
        )
        ident = message.get("id")
        if kind == "user" or not isinstance(ident, str) or ident != reply_id:
            builder.next_message()  # a user line, or the first line of a reply
            reply_id = ident if kind == "assistant" and isinstance(ident, str) else None
        if kind == "user":
            _user(builder, message.get("content"), at)
            continue
        _assistant(builder, message, at)
        counts = message.get("usage")
        if isinstance(counts, dict) and isinstance(ident, str):
            prompt = sum(
                token_count(counts.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            usage[ident] = (prompt, token_count(counts.get("output_tokens")))
    if not recognised:
        raise bad_file(path, "line 1", "no Claude Code transcript entry in the file", _NAME)
    if parent is not None:
        agent_type, description = _agent_meta(path)
        builder.title = builder.title or description
        builder.extra["parent"] = parent
        builder.extra["parentSessionId"] = imported_session_id(SOURCE, parent)
        builder.notes = (
            f"A sub-agent{f' ({agent_type})' if agent_type else ''} of Claude Code session "
            f"{parent} (imported as {imported_session_id(SOURCE, parent)})."
        )
    builder.prompt_tokens = sum(p for p, _ in usage.values())
    builder.completion_tokens = sum(c for _, c in usage.values())
    session = builder.build()
    return [session] if session is not None else []


def meta_file(transcript: Path) -> Path:
    """The ``agent-<id>.meta.json`` that describes the sub-agent of ``transcript``."""
    return transcript.with_name(f"{transcript.stem}.meta.json")


def _agent_meta(transcript: Path) -> tuple[str | None, str | None]:
    """The sub-agent's type and description from its meta file (``None`` when absent,
    unreadable or not a small regular file)."""
    meta = meta_file(transcript)
    try:
        if not meta.is_file() or meta.stat().st_size > _META_MAX_BYTES:
            return None, None
        data = orjson.loads(meta.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    kind, description = data.get("agentType"), data.get("description")
    return (
        kind if isinstance(kind, str) and kind else None,
        description if isinstance(description, str) and description else None,
    )


def _user(builder: SessionBuilder, content: Any, at: str) -> None:
    if isinstance(content, str):
        builder.say("user", content, at)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        image = image_of(block)
        if kind == "text":
            builder.say("user", str(block.get("text") or ""), at)
        elif kind == "tool_result":
            builder.result(
                block.get("tool_use_id"),
                block.get("content"),
                at,
                is_error=bool(block.get("is_error")),
            )
        elif image is not None:
            builder.image("user", image, at)
        else:
            builder.placeholder("user", f"a Claude Code {kind or 'untyped'} block", at)


def _assistant(builder: SessionBuilder, message: dict[str, Any], at: str) -> None:
    model = message.get("model")
    if isinstance(model, str) and model and not model.startswith("<"):
        builder.model = model
    content = message.get("content")
    if isinstance(content, str):
        builder.say("assistant", content, at)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            builder.say("assistant", str(block.get("text") or ""), at)
        elif kind == "thinking":
            builder.think(str(block.get("thinking") or ""), at)
        elif kind in ("tool_use", "server_tool_use"):
            builder.call(block.get("id"), str(block.get("name") or ""), block.get("input"), at)
        elif kind == "redacted_thinking":  # encrypted: a placeholder, still reasoning
            builder.think(placeholder_text("Claude Code's redacted reasoning"), at)
        elif kind == "web_search_tool_result":
            builder.result(block.get("tool_use_id"), _search_results(block.get("content")), at)
        else:
            image = image_of(block)
            if image is not None:
                builder.image("assistant", image, at)
            else:
                builder.placeholder("assistant", f"a Claude Code {kind or 'untyped'} block", at)


def _search_results(content: Any) -> str:
    """A web search's results as lines of title and address (or its error)."""
    if not isinstance(content, list):
        return text_of(content)
    lines = [
        f"{item.get('title') or ''} <{item.get('url') or ''}>".strip()
        for item in content
        if isinstance(item, dict)
    ]
    return "\n".join(lines)
