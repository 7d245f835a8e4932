"""Gemini CLI's sessions: ``~/.gemini/tmp/<project hash>/chats/session-*.jsonl`` (since
v0.39, 2026-04; ``session-*.json`` before) and the chats saved with ``/chat save TAG``
(``checkpoint-TAG.json`` beside them).

Since v0.39 a session is a JSONL log, appended to as the conversation goes:
its first line is the metadata (``sessionId``, ``projectHash``, ``startTime``,
``lastUpdated``, ``kind`` ``main`` or ``subagent``); each message is a line of
its own, written again whole (same ``id``) when it changes, the later line
replacing the earlier in place; ``{"$set": {...}}`` updates the metadata (a
``messages`` list replaces all messages); ``{"$rewindTo": id}`` drops that
message and every later one. A sub-agent's log lies in a folder named after
its parent session, ``chats/<parent id>/<id>.jsonl``: it is imported as its own
session with a note naming the parent.

Before v0.39 a recorded session was one JSON object: ``sessionId``, ``projectHash``,
``startTime``, ``lastUpdated`` and ``messages``, each with ``id``,
``timestamp``, ``type`` (``user``, ``gemini``, or ``info``/``error``/
``warning`` notices the CLI showed and never sent to its model: left out and
counted in ``importedFrom.skipped``) and ``content`` (text, or a list of Gemini API
parts). A ``gemini`` message also has ``model``, ``tokens`` (``input``,
``output``, ``thoughts``), ``thoughts`` (``subject`` and ``description``) and
``toolCalls``: ``id``, ``name``, ``args``, ``status`` and ``result`` (parts
holding a ``functionResponse``). Each ``gemini`` message is one reply, timed
when it was recorded, its thoughts the reasoning parts it begins with. Images
(``inlineData``, ``fileData``) become image references; other parts that are
not text become placeholders.

A saved chat is the API history itself: a list of ``{"role": "user"|"model",
"parts": [...]}`` whose parts are ``text`` (``thought: true`` for reasoning),
``functionCall`` (``name``, ``args``, ``id``) and ``functionResponse``
(``name``, ``response``, ``id``). It has no timestamps: the file's time is used.

Example::

    chats = Path("~/.gemini/tmp/ab12…/chats").expanduser()
    [session] = read_gemini(chats / "session-2026-05-01T10-00-3f1c.jsonl", DamagedLines())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from ollm_cli.pipeline.importers._content import image_of, iso_time, text_of, token_count
from ollm_cli.pipeline.importers._reading import DamagedLines, bad_file, json_lines, read_json
from ollm_cli.pipeline.importers._sessions import SessionBuilder, imported_session_id
from ollm_cli.pipeline.records import Session

SOURCE: Final = "gemini"
_NAME = "Gemini CLI"
_NOTICES = {
    kind: f"Gemini CLI {kind} notices (shown by Gemini CLI, never sent to its model)"
    for kind in ("info", "warning", "error")
}


def read_gemini(path: Path, damaged: DamagedLines) -> list[Session]:
    """The session of one session log, recorded-session or saved-chat file."""
    if path.suffix == ".jsonl":
        builder = _recorded(path, _replayed(path, damaged))
    else:
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


def _replayed(path: Path, damaged: DamagedLines) -> dict[str, Any]:
    """The conversation record a session log amounts to, replayed line by line."""
    metadata: dict[str, Any] = {}
    messages: dict[str, dict[str, Any]] = {}
    for number, line in json_lines(path, _NAME, damaged):
        if isinstance(line.get("$rewindTo"), str):
            ids = list(messages)
            cut = ids.index(line["$rewindTo"]) if line["$rewindTo"] in messages else 0
            for ident in ids[cut:]:
                del messages[ident]
        elif isinstance(line.get("id"), str):
            messages[line["id"]] = line
        elif isinstance(line.get("$set"), dict):
            update = line["$set"]
            if isinstance(update.get("messages"), list):
                messages = _by_id(update["messages"])
            metadata.update({k: v for k, v in update.items() if k != "messages"})
        elif isinstance(line.get("sessionId"), str) and isinstance(line.get("projectHash"), str):
            metadata.update({k: v for k, v in line.items() if k != "messages"})
            if isinstance(line.get("messages"), list):
                messages.update(_by_id(line["messages"]))
        else:
            problem = "neither session metadata, a message, $set nor $rewindTo"
            damaged.skip(number, bad_file(path, f"line {number}", problem, _NAME))
    if not metadata.get("sessionId"):
        raise bad_file(path, "line 1", "no session metadata line (sessionId, projectHash)", _NAME)
    return metadata | {"messages": list(messages.values())}


def _by_id(messages: list[Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _recorded(path: Path, document: dict[str, Any]) -> SessionBuilder:
    source_id = document.get("sessionId")
    builder = SessionBuilder(
        marks_replies=True, source=SOURCE, source_id=str(source_id or path.stem), path=path
    )
    if isinstance(document.get("projectHash"), str):
        builder.extra["projectHash"] = document["projectHash"]
    if isinstance(document.get("summary"), str):
        builder.title = document["summary"]
    if document.get("kind") == "subagent" and path.parent.name != "chats":
        parent = path.parent.name  # chats/<parent session id>/<id>.jsonl
        builder.extra["parent"] = parent
        builder.extra["parentSessionId"] = imported_session_id(SOURCE, parent)
        builder.notes = (
            f"A sub-agent of Gemini CLI session {parent} "
            f"(imported as {imported_session_id(SOURCE, parent)})."
        )
    start = iso_time(document.get("startTime"))
    builder.started = start
    for index, message in enumerate(document["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise bad_file(path, f"messages[{index}]", "a message without a type", _NAME)
        at = iso_time(message.get("timestamp"), start)
        kind = message["type"]
        builder.next_message()  # each record is one message, each gemini one reply
        if kind == "user":
            _content(builder, "user", message.get("content"), at)
        elif kind == "gemini":
            _answer(builder, message, at)
        elif kind in _NOTICES:
            builder.skip(_NOTICES[kind])
        else:
            builder.skip(f"Gemini CLI messages of type {kind[:40]!r} (a kind not read here)")
    return builder


def _content(
    builder: SessionBuilder, role: Literal["user", "assistant"], content: Any, at: str
) -> None:
    """Text, then an image reference or a placeholder for each part that is not text."""
    builder.say(role, _text(content), at)
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict) or isinstance(part.get("text"), str):
            continue
        image = image_of(part)
        if image is not None:
            builder.image(role, image, at)
        elif not ({"functionCall", "functionResponse"} & part.keys()):
            kind = next(iter(part), "empty")
            builder.placeholder(role, f"a Gemini CLI {kind} part", at)


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
            builder.think(heading + description, at)
    tokens = message.get("tokens")
    if isinstance(tokens, dict):
        builder.prompt_tokens += token_count(tokens.get("input"))
        builder.completion_tokens += token_count(tokens.get("output"))
        builder.thinking_tokens += token_count(tokens.get("thoughts"))
    _content(builder, "assistant", message.get("content"), at)
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
    builder = SessionBuilder(
        marks_replies=True, source=SOURCE, source_id=f"{path.parent.name}/{path.stem}", path=path
    )
    try:
        at = iso_time(path.stat().st_mtime)
    except OSError:
        at = iso_time(None)
    for index, content in enumerate(history):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise bad_file(path, f"item {index}", "a history entry without parts", _NAME)
        role = content.get("role")
        builder.next_message()
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
