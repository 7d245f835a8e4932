"""Claude Code's project transcripts: ``~/.claude/projects/<folder>/<session id>.jsonl``.

One JSON object a line. The conversation's lines have ``type`` ``user`` or
``assistant`` and carry ``sessionId``, ``uuid``, ``parentUuid``, ``timestamp``,
``cwd`` and ``message`` (the Anthropic Messages API shape): a user's
``content`` is text or a list of blocks, among them ``tool_result`` blocks
(``tool_use_id``, ``content``, ``is_error``) that answer the assistant's
``tool_use`` blocks (``id``, ``name``, ``input``); an assistant's ``content``
holds ``text``, ``thinking`` and ``tool_use`` blocks, with ``model`` and
``usage``. A streamed answer is written a block a line, each line repeating
the message's ``id`` and usage. ``summary`` lines give a title. Lines of a
sub-agent (``isSidechain``) and injected ones (``isMeta``) are not the
conversation; other line types (snapshots, queue operations) are skipped.

Example::

    [session] = read_claude_code(Path("~/.claude/projects/-home-me-app/3f1c….jsonl"))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from ollm_cli.pipeline.importers._sessions import SessionBuilder, bad_file, iso_time, json_lines
from ollm_cli.pipeline.records import Session

SOURCE: Final = "claude-code"
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


def read_claude_code(path: Path) -> list[Session]:
    """The session of one transcript file (none when it holds no message)."""
    builder = SessionBuilder(source=SOURCE, source_id=path.stem, path=path)
    usage: dict[str, tuple[int, int]] = {}
    recognised = False
    for number, line in json_lines(path, "Claude Code"):
        kind = line.get("type")
        if kind not in _KNOWN:
            if not recognised and not isinstance(kind, str):
                raise bad_file(path, f"line {number}", "no Claude Code entry type", "Claude Code")
            continue
        recognised = True
        if kind == "summary" and isinstance(line.get("summary"), str):
            builder.title = builder.title or line["summary"]
            continue
        if kind == "custom-title" and isinstance(line.get("customTitle"), str):
            builder.title = line["customTitle"]
            continue
        if kind not in _CONVERSATION or line.get("isSidechain") or line.get("isMeta"):
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            raise bad_file(
                path, f"line {number}", f"a {kind} entry without its message", "Claude Code"
            )
        if isinstance(line.get("sessionId"), str):
            builder.source_id = line["sessionId"]
        if isinstance(line.get("cwd"), str) and builder.working_dir is None:
            builder.working_dir = line["cwd"]
        at = iso_time(line.get("timestamp"))
        if kind == "user":
            _user(builder, message.get("content"), at)
        else:
            _assistant(builder, message, at)
            counts = message.get("usage")
            if isinstance(counts, dict) and isinstance(message.get("id"), str):
                prompt = sum(
                    int(counts.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                )
                usage[message["id"]] = (prompt, int(counts.get("output_tokens") or 0))
    if not recognised:
        raise bad_file(path, "line 1", "no Claude Code transcript entry in the file", "Claude Code")
    builder.prompt_tokens = sum(p for p, _ in usage.values())
    builder.completion_tokens = sum(c for _, c in usage.values())
    session = builder.build()
    return [session] if session is not None else []


def _user(builder: SessionBuilder, content: Any, at: str) -> None:
    if isinstance(content, str):
        builder.say("user", content, at)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            builder.say("user", str(block.get("text") or ""), at)
        elif block.get("type") == "tool_result":
            builder.result(
                block.get("tool_use_id"),
                block.get("content"),
                at,
                is_error=bool(block.get("is_error")),
            )


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
