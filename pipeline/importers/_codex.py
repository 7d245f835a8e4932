"""Codex's rollout files: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

One JSON object a line, ``{"timestamp", "type", "payload"}``:

- ``session_meta``: the session's ``id``, ``timestamp`` and ``cwd``;
- ``turn_context``: each turn's ``model`` (and ``cwd``);
- ``response_item``: what went to and came from the model, in the Responses API
  shape: ``message`` (``role``, ``content`` of ``input_text``/``output_text``
  items), ``reasoning`` (``summary`` texts), ``function_call`` (``name``,
  ``arguments`` as JSON text, ``call_id``), ``function_call_output``
  (``call_id``, ``output``), ``custom_tool_call``/``custom_tool_call_output``
  and ``local_shell_call`` (``action.command``);
- ``event_msg``: UI events, of which ``token_count`` gives the usage so far;
- ``compacted``: a summary that replaced history (kept as a system message; a
  placeholder when the summary is not written out);
- ``world_state``, ``inter_agent_communication``: context, not the conversation.

Later versions (0.10x) add ``web_search_call`` (``action.query``), kept as a
``web_search`` call, ``image_generation_call`` and ``input_image`` content, kept
as image references, and ``compaction`` items, kept as placeholders; a
``ghost_snapshot`` (a git snapshot) is not the conversation.

Files of early versions begin with the bare session meta (``id``,
``timestamp``, ``instructions``) followed by bare response items without
their own time and ``{"record_type": "state"}`` lines; they are read too, timed
from the header. The session starts at the header's time. The context Codex
injects into user messages (``<environment_context>``, ``<user_instructions>``,
AGENTS.md) and ``developer`` messages are not the conversation and are skipped.

Example::

    rollout = Path("~/.codex/sessions/2025/10/29/rollout-….jsonl").expanduser()
    [session] = read_codex(rollout, DamagedLines())
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final, Literal

from ollm_cli.pipeline.importers._content import image_of, iso_time, token_count
from ollm_cli.pipeline.importers._reading import DamagedLines, bad_file, json_lines
from ollm_cli.pipeline.importers._sessions import SessionBuilder
from ollm_cli.pipeline.records import ImagePart, Session

SOURCE: Final = "codex"
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<INSTRUCTIONS>",
)
_LINE_TYPES = {
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
    "world_state",
    "inter_agent_communication",
    "inter_agent_communication_metadata",
}
_NAME = "Codex"
_NOT_CONVERSATION = {"ghost_snapshot", "additional_tools", "compaction_trigger", "other"}


def read_codex(path: Path, damaged: DamagedLines) -> list[Session]:
    """The session of one rollout file (none when it holds no message)."""
    builder = SessionBuilder(source=SOURCE, source_id=path.stem, path=path)
    meta_seen = False
    last: str | None = None
    for number, line in json_lines(path, _NAME, damaged):
        where = f"line {number}"
        kind = line.get("type")
        if isinstance(kind, str) and kind in _LINE_TYPES and "payload" in line:
            payload = line["payload"]
            if not isinstance(payload, dict):
                problem = f"the payload of a {kind} line is not an object"
                damaged.skip(number, bad_file(path, where, problem, _NAME))
                continue
        elif not meta_seen and "id" in line and "type" not in line:
            kind, payload = "session_meta", line
        elif line.get("record_type") == "state":
            continue
        elif isinstance(kind, str) and meta_seen and "payload" not in line:
            payload, kind = line, "response_item"
        elif isinstance(kind, str) and "payload" in line:
            continue  # a line type of a later version, not the conversation
        else:
            problem = "not a Codex rollout line (no type and payload)"
            damaged.skip(number, bad_file(path, where, problem, _NAME))
            continue
        at = last = iso_time(line.get("timestamp"), last or builder.started)
        if kind == "session_meta":
            if not meta_seen:
                meta_seen = True
                _meta(builder, payload)
                last = builder.started or last
            continue
        meta_seen = True
        if kind == "turn_context":
            if isinstance(payload.get("model"), str):
                builder.model = payload["model"]
            if builder.working_dir is None and isinstance(payload.get("cwd"), str):
                builder.working_dir = payload["cwd"]
        elif kind == "event_msg":
            _event(builder, payload)
        elif kind == "response_item":
            _item(builder, payload, at)
        elif kind == "compacted":
            summary = payload.get("message")
            if isinstance(summary, str) and summary.strip():
                builder.next_message()
                builder.say("system", f"(Codex compacted the conversation here:)\n{summary}", at)
            else:
                builder.placeholder("system", "Codex compacted the conversation here", at)
    if not meta_seen:
        raise bad_file(path, "line 1", "no Codex session header or rollout line", _NAME)
    session = builder.build()
    return [session] if session is not None else []


def _meta(builder: SessionBuilder, payload: dict[str, Any]) -> None:
    if isinstance(payload.get("id"), str):
        builder.source_id = payload["id"]
    if isinstance(payload.get("cwd"), str):
        builder.working_dir = payload["cwd"]
    if isinstance(payload.get("cli_version"), str):
        builder.extra["version"] = payload["cli_version"]
    if payload.get("timestamp"):
        builder.started = iso_time(payload["timestamp"])


def _event(builder: SessionBuilder, payload: dict[str, Any]) -> None:
    if payload.get("type") != "token_count":
        return
    info = payload.get("info")
    total = info.get("total_token_usage") if isinstance(info, dict) else None
    if isinstance(total, dict):
        builder.prompt_tokens = token_count(total.get("input_tokens"))
        builder.completion_tokens = token_count(total.get("output_tokens"))
        builder.thinking_tokens = token_count(total.get("reasoning_output_tokens"))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            texts.append(item["text"])
    return "\n".join(texts)


def _images(
    builder: SessionBuilder, role: Literal["user", "assistant"], content: Any, at: str
) -> None:
    for item in content if isinstance(content, list) else []:
        image = image_of(item) if isinstance(item, dict) else None
        if image is not None:
            builder.image(role, image, at)


def _item(builder: SessionBuilder, item: dict[str, Any], at: str) -> None:
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        text = _content_text(item.get("content"))
        if role == "user" and not text.lstrip().startswith(_INJECTED):
            builder.next_message()
            builder.say("user", text, at)
            _images(builder, "user", item.get("content"), at)
        elif role == "assistant":
            builder.say("assistant", text, at)
            _images(builder, "assistant", item.get("content"), at)
    elif kind == "reasoning":
        summary = _content_text(item.get("summary"))
        builder.think(summary or _content_text(item.get("content")), at)
    elif kind == "function_call":
        builder.call(item.get("call_id"), str(item.get("name") or ""), item.get("arguments"), at)
    elif kind == "custom_tool_call":
        builder.call(
            item.get("call_id"), str(item.get("name") or ""), {"input": item.get("input")}, at
        )
    elif kind == "local_shell_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        builder.call(
            item.get("call_id") or item.get("id"),
            "shell",
            {"command": action.get("command")} if action else {},
            at,
        )
    elif kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        failed = isinstance(output, dict) and output.get("success") is False
        builder.result(item.get("call_id"), output, at, is_error=failed)
    elif kind == "web_search_call":
        action = item.get("action")
        builder.call(item.get("id"), "web_search", action if isinstance(action, dict) else {}, at)
    elif kind == "image_generation_call":
        builder.image("assistant", ImagePart(mime_type="image/png"), at)
    elif kind in ("compaction", "context_compaction"):
        builder.placeholder("system", "Codex compacted the conversation here", at)
    elif not (isinstance(kind, str) and kind in _NOT_CONVERSATION):
        builder.placeholder("assistant", f"a Codex {kind or 'untyped'} item", at)
