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
first line. ``summary`` lines give a title. Injected lines (``isMeta``: a
command's caveat or expansion) and ``system`` notices are not the conversation:
they are left out and counted (``importedFrom.skipped``); other line types
(snapshots, queue operations, progress) are skipped.

A sub-agent's conversation (``isSidechain`` lines, ``agentId``) is written to
its own file, ``<project>/<session id>/subagents/agent-<agent id>.jsonl``
(``<project>/agent-<agent id>.jsonl`` before Claude Code 2.1), whose
``sessionId`` is its parent's: it is imported as a session of its own, with a
note naming the parent session (``importedFrom.parent``); the
``agent-<agent id>.meta.json`` beside it (``agentType``, ``description``) gives
its title and kind. Such a file is known by its lines, whatever its name. Older
versions wrote sidechain lines into the main transcript itself: each of those
conversations (by ``agentId``, else by the first line of its ``parentUuid``
chain) becomes a sub-agent session of its own too.

A ``tool_result`` whose ``tool_use`` has no ``id`` (or that names none) answers
the call waiting before it (see :meth:`SessionBuilder.result`).

Images become image references; web searches are calls with their results;
other blocks (documents, redacted reasoning) become placeholders.

Example::

    transcript = Path("~/.claude/projects/-home-me-app/3f1c….jsonl").expanduser()
    [session] = read_claude_code(transcript, DamagedLines())
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
_SYSTEM_NOTICES = "Claude Code system notices (shown by Claude Code, never sent to its model)"
_INJECTED = (
    "Claude Code injected lines (isMeta: context it added, such as a command's caveat "
    "or expansion, not typed by the user)"
)


@dataclass
class _Thread:
    """One conversation of a transcript: its main one, or a sub-agent's."""

    builder: SessionBuilder
    agent: str | None = None
    """The sub-agent's name in the session's source id (``agent-<id>``, or
    ``sidechain-<uuid of its first line>`` for an inline one); None: the main one."""
    parent: str | None = None
    usage: dict[str, tuple[int, int]] = field(default_factory=dict)
    reply_id: str | None = None


def read_claude_code(path: Path, damaged: DamagedLines) -> list[Session]:
    """The sessions of one transcript file: its conversation, then each sub-agent's
    (none when it holds no message)."""
    file_agent = path.stem if path.name.startswith("agent-") else None
    threads: dict[str | None, _Thread] = {}
    roots: dict[str, str] = {}
    recognised = False
    title: str | None = None
    skipped: dict[str, int] = {}
    for number, line in json_lines(path, _NAME, damaged):
        kind = line.get("type")
        if not isinstance(kind, str) or kind not in _KNOWN:
            if not isinstance(kind, str):
                problem = "no Claude Code entry type"
                damaged.skip(number, bad_file(path, f"line {number}", problem, _NAME))
            continue
        recognised = True
        if kind == "summary" and isinstance(line.get("summary"), str):
            title = title or line["summary"]
            continue
        if kind == "custom-title" and isinstance(line.get("customTitle"), str):
            title = line["customTitle"]
            continue
        if kind == "system" and isinstance(line.get("content"), str) and line["content"].strip():
            skipped[_SYSTEM_NOTICES] = skipped.get(_SYSTEM_NOTICES, 0) + 1
            continue
        if kind not in _CONVERSATION:
            continue
        if line.get("isMeta"):
            skipped[_INJECTED] = skipped.get(_INJECTED, 0) + 1
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            problem = f"a {kind} entry without its message"
            damaged.skip(number, bad_file(path, f"line {number}", problem, _NAME))
            continue
        key = _thread_key(line, number, roots, file_agent)
        thread = threads.get(key)
        if thread is None:
            builder = SessionBuilder(
                marks_replies=True, source=SOURCE, source_id=path.stem, path=path
            )
            thread = threads[key] = _Thread(builder, agent=key)
        _read_line(thread, kind, line, message)
    if not recognised:
        raise bad_file(path, "line 1", "no Claude Code transcript entry in the file", _NAME)
    main = threads.get(None)
    if main is not None:
        main.builder.title = title
        main.builder.skipped = skipped
    elif len(threads) == 1:  # a sub-agent's own file, whatever its name
        [only] = threads.values()
        only.builder.skipped = skipped
    sessions = []
    for thread in sorted(threads.values(), key=lambda t: t.agent is not None):  # main first
        session = _build(thread, path, whole_file=main is None and len(threads) == 1)
        if session is not None:
            sessions.append(session)
    return sessions


def _thread_key(
    line: dict[str, Any], number: int, roots: dict[str, str], file_agent: str | None
) -> str | None:
    """Which conversation of the file ``line`` belongs to: None for the main one; a
    sub-agent's lines (``isSidechain``) by their ``agentId``, else (an inline sidechain
    of versions before sub-agent files) by the first line of their chain of
    ``parentUuid``."""
    if not line.get("isSidechain"):
        return None
    agent = line.get("agentId")
    if isinstance(agent, str) and agent:
        return f"agent-{agent}"
    if file_agent is not None:
        return file_agent
    uuid, parent = line.get("uuid"), line.get("parentUuid")
    key = roots.get(parent) if isinstance(parent, str) else None
    if key is None:
        key = f"sidechain-{uuid if isinstance(uuid, str) and uuid else number}"
    if isinstance(uuid, str):
        roots[uuid] = key
    return key


def _read_line(thread: _Thread, kind: str, line: dict[str, Any], message: dict[str, Any]) -> None:
    """One user or assistant line into its conversation."""
    builder = thread.builder
    if isinstance(line.get("sessionId"), str):
        if thread.agent is None:
            builder.source_id = line["sessionId"]
        else:
            thread.parent = line["sessionId"]
            builder.source_id = f"{thread.parent}/{thread.agent}"
    if isinstance(line.get("cwd"), str) and builder.working_dir is None:
        builder.working_dir = line["cwd"]
    at = iso_time(
        line.get("timestamp"), builder.messages[-1].timestamp if builder.messages else None
    )
    ident = message.get("id")
    if kind == "user" or not isinstance(ident, str) or ident != thread.reply_id:
        builder.next_message()  # a user line, or the first line of a reply
        thread.reply_id = ident if kind == "assistant" and isinstance(ident, str) else None
    if kind == "user":
        _user(builder, message.get("content"), at)
        return
    _assistant(builder, message, at)
    counts = message.get("usage")
    if isinstance(counts, dict) and isinstance(ident, str):
        prompt = sum(
            token_count(counts.get(k))
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        thread.usage[ident] = (prompt, token_count(counts.get("output_tokens")))


def _build(thread: _Thread, path: Path, *, whole_file: bool) -> Session | None:
    """The session of one conversation; a sub-agent's names its parent (and, when it is
    the whole file, takes its kind and description from the file's meta file)."""
    builder = thread.builder
    parent = thread.parent
    if thread.agent is not None and parent is None and not whole_file:
        builder.source_id = f"{builder.source_id}/{thread.agent}"  # beside its main one
    if parent is not None:
        agent_type, description = _agent_meta(path) if whole_file else (None, None)
        builder.title = builder.title or description
        builder.extra["parent"] = parent
        builder.extra["parentSessionId"] = imported_session_id(SOURCE, parent)
        builder.notes = (
            f"A sub-agent{f' ({agent_type})' if agent_type else ''} of Claude Code session "
            f"{parent} (imported as {imported_session_id(SOURCE, parent)})."
        )
    builder.prompt_tokens = sum(p for p, _ in thread.usage.values())
    builder.completion_tokens = sum(c for _, c in thread.usage.values())
    return builder.build()


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
