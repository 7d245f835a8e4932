"""Gemini CLI's sessions: ``~/.gemini/tmp/<project hash>/chats/session-*.json`` and the
chats saved with ``/chat save TAG`` (``checkpoint-TAG.json`` beside them).

A recorded session is one JSON object: ``sessionId``, ``projectHash``,
``startTime``, ``lastUpdated`` and ``messages``, each with ``id``,
``timestamp``, ``type`` (``user``, ``gemini``, or ``info``/``error``/
``warning`` notices, skipped) and ``content`` (text, or a list of Gemini API
parts). A ``gemini`` message also has ``model``, ``tokens`` (``input``,
``output``, ``thoughts``), ``thoughts`` (``subject`` and ``description``) and
``toolCalls``: ``id``, ``name``, ``args``, ``status`` and ``result`` (parts
holding a ``functionResponse``).

A saved chat is the API history itself: a list of ``{"role": "user"|"model",
"parts": [...]}`` whose parts are ``text`` (``thought: true`` for reasoning),
``functionCall`` (``name``, ``args``, ``id``) and ``functionResponse``
(``name``, ``response``, ``id``). It has no timestamps: the file's time is used.

Example::

    [session] = read_gemini(Path("~/.gemini/tmp/ab12…/chats/session-2025-09-01T10-00-3f1c.json"))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from ollm_cli.pipeline.importers._sessions import (
    SessionBuilder,
    bad_file,
    iso_time,
    read_json,
    text_of,
)
from ollm_cli.pipeline.records import Session

SOURCE: Final = "gemini"
_NAME = "Gemini CLI"


def read_gemini(path: Path) -> list[Session]:
    """The session of one recorded-session or saved-chat file."""
    document = read_json(path, _NAME)
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        builder = _recorded(path, document)
    elif isinstance(document, list):
        builder = _saved(path, document)
    else:
        raise bad_file(
            path,
            "line 1",
            "neither a recorded session (an object with messages) nor a saved chat (a list)",
            _NAME,
        )
    session = builder.build()
    return [session] if session is not None else []


def _recorded(path: Path, document: dict[str, Any]) -> SessionBuilder:
    source_id = document.get("sessionId")
    builder = SessionBuilder(source=SOURCE, source_id=str(source_id or path.stem), path=path)
    if isinstance(document.get("projectHash"), str):
        builder.extra["projectHash"] = document["projectHash"]
    if isinstance(document.get("summary"), str):
        builder.title = document["summary"]
    start = iso_time(document.get("startTime"))
    for index, message in enumerate(document["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise bad_file(path, f"messages[{index}]", "a message without a type", _NAME)
        at = iso_time(message.get("timestamp"), start)
        kind = message["type"]
        if kind == "user":
            builder.say("user", _text(message.get("content")), at)
        elif kind == "gemini":
            _answer(builder, message, at)
    return builder


def _text(content: Any) -> str:
    """The text of message content: a string, or parts of which ``text`` ones count."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    return "\n".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )


def _answer(builder: SessionBuilder, message: dict[str, Any], at: str) -> None:
    if isinstance(message.get("model"), str):
        builder.model = message["model"]
    thoughts = message.get("thoughts")
    for thought in thoughts if isinstance(thoughts, list) else []:
        if isinstance(thought, dict):
            subject = str(thought.get("subject") or "").strip()
            description = str(thought.get("description") or "").strip()
            heading = f"**{subject}** " if subject else ""
            builder.think(heading + description, iso_time(thought.get("timestamp"), at))
    tokens = message.get("tokens")
    if isinstance(tokens, dict):
        builder.prompt_tokens += int(tokens.get("input") or 0)
        builder.completion_tokens += int(tokens.get("output") or 0)
        builder.thinking_tokens += int(tokens.get("thoughts") or 0)
    builder.say("assistant", _text(message.get("content")), at)
    calls = message.get("toolCalls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        called = iso_time(call.get("timestamp"), at)
        ident = builder.call(call.get("id"), str(call.get("name") or ""), call.get("args"), called)
        result = call.get("result")
        output = _response_text(result) if result else call.get("resultDisplay")
        if output is not None or call.get("status") in ("success", "error", "cancelled"):
            builder.result(
                ident, output or "", called, is_error=call.get("status") in ("error", "cancelled")
            )


def _response_text(result: Any) -> str:
    """The text of a tool's result parts (``functionResponse.response``, or text parts)."""
    parts = result if isinstance(result, list) else [result]
    pieces = []
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict):
            response = part["functionResponse"].get("response")
            pieces.append(text_of(response))
        else:
            pieces.append(text_of(part))
    return "\n".join(p for p in pieces if p)


def _saved(path: Path, history: list[Any]) -> SessionBuilder:
    builder = SessionBuilder(source=SOURCE, source_id=f"{path.parent.name}/{path.stem}", path=path)
    try:
        at = iso_time(path.stat().st_mtime)
    except OSError:
        at = iso_time(None)
    for index, content in enumerate(history):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise bad_file(path, f"item {index}", "a history entry without parts", _NAME)
        role = content.get("role")
        for part in content["parts"]:
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                if part.get("thought"):
                    builder.think(part["text"], at)
                else:
                    builder.say("assistant" if role == "model" else "user", part["text"], at)
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                builder.call(call.get("id"), str(call.get("name") or ""), call.get("args"), at)
            elif isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"]
                builder.result(
                    response.get("id"),
                    response.get("response"),
                    at,
                    name=response.get("name"),
                )
    return builder
