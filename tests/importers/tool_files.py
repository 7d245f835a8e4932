"""Session files written the way each tool writes them, for the import tests.

The shapes follow each tool's own source: Claude Code's project transcripts
(one Anthropic Messages API message a line, a streamed answer a block a line
sharing the message id), Codex's rollout lines (``session_meta``,
``turn_context``, ``response_item``, ``event_msg``; and the bare lines of early
versions), Gemini CLI's ``ChatRecordingService`` conversation record and its
``/chat save`` checkpoint (the API history). llm's database is written by llm
itself in ``test_import_llm.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

CLAUDE_SESSION = "4f35e220-c435-4cf7-b9b9-f40426042847"
CODEX_SESSION = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"
GEMINI_SESSION = "7d3c2b1a-0f9e-4d8c-b7a6-5e4d3c2b1a09"
WORKDIR = "/home/ada/notes-app"


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def _claude_line(kind: str, uuid: str, parent: str | None, at: str, message: Any) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": WORKDIR,
        "sessionId": CLAUDE_SESSION,
        "version": "2.0.14",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": uuid,
        "timestamp": at,
    }


def claude_code_transcript(projects: Path) -> Path:
    """``projects/-home-ada-notes-app/<session>.jsonl``: a question, a tool call, its
    result, the answer; the streamed answer takes a line per block."""
    usage = {
        "input_tokens": 120,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 30,
        "output_tokens": 45,
    }
    assistant = {
        "id": "msg_01A",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "stop_reason": None,
        "usage": usage,
    }
    lines: list[dict[str, Any]] = [
        {"type": "summary", "summary": "Reading the shopping notes", "leafUuid": "u5"},
        {
            "type": "file-history-snapshot",
            "messageId": "u1",
            "snapshot": {"trackedFileBackups": {}},
            "isSnapshotUpdate": False,
        },
        _claude_line(
            "user",
            "u1",
            None,
            "2025-10-01T09:00:00.000Z",
            {"role": "user", "content": "What is in notes.txt?"},
        ),
        _claude_line(
            "assistant",
            "u2",
            "u1",
            "2025-10-01T09:00:02.000Z",
            assistant
            | {
                "content": [{"type": "thinking", "thinking": "I should read it.", "signature": "x"}]
            },
        ),
        _claude_line(
            "assistant",
            "u3",
            "u2",
            "2025-10-01T09:00:03.000Z",
            assistant
            | {
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Read",
                        "input": {"file_path": f"{WORKDIR}/notes.txt"},
                    }
                ],
                "stop_reason": "tool_use",
            },
        ),
        _claude_line(
            "user",
            "u4",
            "u3",
            "2025-10-01T09:00:04.500Z",
            {
                "role": "user",
                "content": [
                    {
                        "tool_use_id": "toolu_01",
                        "type": "tool_result",
                        "content": "     1→buy milk\n",
                    }
                ],
            },
        )
        | {"toolUseResult": {"type": "text", "file": {"filePath": f"{WORKDIR}/notes.txt"}}},
        _claude_line(
            "assistant",
            "u5",
            "u4",
            "2025-10-01T09:00:06.000Z",
            assistant
            | {
                "id": "msg_01B",
                "content": [{"type": "text", "text": "It says: buy milk."}],
                "stop_reason": "end_turn",
                "usage": {**usage, "output_tokens": 8},
            },
        ),
    ]
    return write_jsonl(projects / "-home-ada-notes-app" / f"{CLAUDE_SESSION}.jsonl", lines)


CLAUDE_OLD_SESSION = "6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d"


def claude_code_inline_sidechains(projects: Path) -> Path:
    """A transcript of Claude Code 1.0.x, which wrote its sub-agents' conversations into
    the main file: sidechain lines (``isSidechain: true``, no ``agentId``) whose chain of
    ``parentUuid`` starts at ``null``. Here a Task sub-agent searches (its tool call
    and result inside the sidechain) and a "Warmup" sidechain greets; the main thread's
    Task call gets the sub-agent's answer. (The shape of the sidechain lines follows the
    descriptions of ticpu/claude-conversation-search-mcp's docs/jsonl-format.md and the
    sidechain fixtures of public transcript readers: roots with a null parent, each
    reply a line, results as user lines.)"""

    def line(kind: str, uuid: str, parent: str | None, at: str, message: Any) -> dict[str, Any]:
        return _claude_line(kind, uuid, parent, at, message) | {
            "sessionId": CLAUDE_OLD_SESSION,
            "version": "1.0.44",
        }

    def side(kind: str, uuid: str, parent: str | None, at: str, message: Any) -> dict[str, Any]:
        return line(kind, uuid, parent, at, message) | {"isSidechain": True}

    def reply(ident: str, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": content,
        }

    task = {
        "type": "tool_use",
        "id": "toolu_task",
        "name": "Task",
        "input": {"description": "Find TODOs", "prompt": "List every TODO in the project."},
    }
    lines = [
        side("user", "w1", None, "2025-07-01T10:00:00.000Z", {"role": "user", "content": "Warmup"}),
        side(
            "assistant",
            "w2",
            "w1",
            "2025-07-01T10:00:01.000Z",
            reply("msg_w", [{"type": "text", "text": "Ready to help."}]),
        ),
        line(
            "user",
            "m1",
            None,
            "2025-07-01T10:00:05.000Z",
            {"role": "user", "content": "Are there TODOs left?"},
        ),
        line("assistant", "m2", "m1", "2025-07-01T10:00:07.000Z", reply("msg_m1", [task])),
        side(
            "user",
            "s1",
            None,
            "2025-07-01T10:00:08.000Z",
            {"role": "user", "content": "List every TODO in the project."},
        ),
        side(
            "assistant",
            "s2",
            "s1",
            "2025-07-01T10:00:09.000Z",
            reply(
                "msg_s1",
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_grep",
                        "name": "Grep",
                        "input": {"pattern": "TODO"},
                    }
                ],
            ),
        ),
        side(
            "user",
            "s3",
            "s2",
            "2025-07-01T10:00:10.000Z",
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_grep",
                        "content": "app.py:3: TODO",
                    }
                ],
            },
        ),
        side(
            "assistant",
            "s4",
            "s3",
            "2025-07-01T10:00:12.000Z",
            reply("msg_s2", [{"type": "text", "text": "One TODO, in app.py line 3."}]),
        ),
        line(
            "user",
            "m3",
            "m2",
            "2025-07-01T10:00:13.000Z",
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_task",
                        "content": [{"type": "text", "text": "One TODO, in app.py line 3."}],
                    }
                ],
            },
        ),
        line(
            "assistant",
            "m4",
            "m3",
            "2025-07-01T10:00:15.000Z",
            reply("msg_m2", [{"type": "text", "text": "Yes: one, in app.py."}]),
        ),
    ]
    return write_jsonl(projects / "-home-ada-notes-app" / f"{CLAUDE_OLD_SESSION}.jsonl", lines)


def _codex(at: str, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": at, "type": kind, "payload": payload}


def codex_rollout(sessions: Path) -> Path:
    """``sessions/2025/10/29/rollout-…-<id>.jsonl`` as Codex 0.4x writes it."""
    lines = [
        _codex(
            "2025-10-29T00:59:38.317Z",
            "session_meta",
            {
                "id": CODEX_SESSION,
                "timestamp": "2025-10-29T00:59:38.308Z",
                "cwd": WORKDIR,
                "originator": "codex_cli_rs",
                "cli_version": "0.46.0",
                "instructions": None,
                "source": "cli",
                "git": {},
            },
        ),
        _codex(
            "2025-10-29T00:59:38.317Z",
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n  <cwd>/home/ada</cwd>\n"
                        "</environment_context>",
                    }
                ],
            },
        ),
        _codex(
            "2025-10-29T00:59:38.320Z",
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "List the files here."}],
            },
        ),
        _codex(
            "2025-10-29T00:59:38.320Z",
            "event_msg",
            {"type": "user_message", "message": "List the files here.", "kind": "plain"},
        ),
        _codex(
            "2025-10-29T00:59:38.321Z",
            "turn_context",
            {
                "cwd": WORKDIR,
                "approval_policy": "on-request",
                "sandbox_policy": {"mode": "workspace-write"},
                "model": "gpt-5-codex",
                "effort": "medium",
                "summary": "auto",
            },
        ),
        _codex(
            "2025-10-29T00:59:39.522Z",
            "response_item",
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Listing files**"}],
                "content": None,
                "encrypted_content": "gAAAAB...",
            },
        ),
        _codex(
            "2025-10-29T00:59:39.700Z",
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["ls","-1"],"workdir":"/home/ada/notes-app"}',
                "call_id": "call_abc",
            },
        ),
        _codex(
            "2025-10-29T00:59:40.100Z",
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_abc",
                "output": '{"output":"notes.txt\\nREADME.md\\n","metadata":{"exit_code":0}}',
            },
        ),
        _codex(
            "2025-10-29T00:59:41.000Z",
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "notes.txt and README.md."}],
            },
        ),
        _codex(
            "2025-10-29T00:59:41.001Z",
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": {
                        "input_tokens": 2946,
                        "cached_input_tokens": 0,
                        "output_tokens": 57,
                        "reasoning_output_tokens": 20,
                        "total_tokens": 3003,
                    }
                },
            },
        ),
    ]
    return write_jsonl(
        sessions / "2025" / "10" / "29" / f"rollout-2025-10-29T00-59-38-{CODEX_SESSION}.jsonl",
        lines,
    )


def codex_early_rollout(sessions: Path) -> Path:
    """A rollout of Codex's first Rust versions: bare meta, bare items, state lines."""
    lines: list[dict[str, Any]] = [
        {
            "id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e",
            "timestamp": "2025-05-07T17:24:21.123Z",
            "instructions": None,
        },
        {"record_type": "state"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hello"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi! How can I help?"}],
        },
    ]
    return write_jsonl(sessions / "2025" / "05" / "07" / "rollout-2025-05-07-5973b6c0.jsonl", lines)


def gemini_session(tmp: Path) -> Path:
    """``tmp/<project hash>/chats/session-…json`` as ``ChatRecordingService`` writes it."""
    record = {
        "sessionId": GEMINI_SESSION,
        "projectHash": "9a1b" * 16,
        "startTime": "2025-09-01T10:00:00.000Z",
        "lastUpdated": "2025-09-01T10:00:09.000Z",
        "messages": [
            {
                "id": "m1",
                "timestamp": "2025-09-01T10:00:00.000Z",
                "type": "user",
                "content": "Count the lines of notes.txt",
            },
            {
                "id": "m2",
                "timestamp": "2025-09-01T10:00:05.000Z",
                "type": "gemini",
                "content": "",
                "thoughts": [
                    {
                        "subject": "Counting lines",
                        "description": "I will run wc.",
                        "timestamp": "2025-09-01T10:00:02.000Z",
                    }
                ],
                "tokens": {
                    "input": 900,
                    "output": 30,
                    "cached": 0,
                    "thoughts": 12,
                    "tool": 0,
                    "total": 942,
                },
                "model": "gemini-2.5-pro",
                "toolCalls": [
                    {
                        "id": "run_shell_command-1756720803000-1",
                        "name": "run_shell_command",
                        "args": {"command": "wc -l notes.txt"},
                        "result": [
                            {
                                "functionResponse": {
                                    "id": "run_shell_command-1756720803000-1",
                                    "name": "run_shell_command",
                                    "response": {"output": "1 notes.txt"},
                                }
                            }
                        ],
                        "status": "success",
                        "timestamp": "2025-09-01T10:00:04.000Z",
                        "displayName": "Shell",
                        "resultDisplay": "1 notes.txt",
                    }
                ],
            },
            {
                "id": "m3",
                "timestamp": "2025-09-01T10:00:09.000Z",
                "type": "gemini",
                "content": "notes.txt has 1 line.",
                "model": "gemini-2.5-pro",
            },
            {
                "id": "m4",
                "timestamp": "2025-09-01T10:00:09.500Z",
                "type": "info",
                "content": "Session saved.",
            },
        ],
    }
    path = tmp / ("9a1b" * 16) / "chats" / "session-2025-09-01T10-00-7d3c2b1a.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return path


def gemini_checkpoint(tmp: Path) -> Path:
    """``tmp/<project hash>/checkpoint-groceries.json``: ``/chat save groceries``."""
    history = [
        {"role": "user", "parts": [{"text": "What should I buy?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me check the notes.", "thought": True},
                {"functionCall": {"name": "read_file", "args": {"absolute_path": "/n.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "read_file",
                        "response": {"output": "buy milk"},
                    }
                }
            ],
        },
        {"role": "model", "parts": [{"text": "Milk."}]},
    ]
    path = tmp / ("9a1b" * 16) / "checkpoint-groceries.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(history, option=orjson.OPT_INDENT_2))
    return path


GEMINI_LOG_SESSION = "5b6c7d8e-9f01-4a2b-8c3d-4e5f60718293"
GEMINI_SUBAGENT = "c0ffee00-1234-4abc-9def-0123456789ab"
PROJECT_HASH = "9a1b" * 16


def gemini_session_log(tmp: Path) -> Path:
    """``tmp/<project hash>/chats/session-…jsonl`` as Gemini CLI writes it since v0.39:
    the metadata line, each message appended (again, whole, when it changes),
    ``$set`` updates and a ``$rewindTo`` that drops a message and what followed."""
    first_reply: dict[str, Any] = {
        "id": "g1",
        "timestamp": "2026-05-02T08:00:06.000Z",
        "type": "gemini",
        "content": "",
        "thoughts": [
            {
                "subject": "Reading the file",
                "description": "I will read notes.txt first.",
                "timestamp": "2026-05-02T08:00:03.000Z",
            }
        ],
        "tokens": None,
        "model": "gemini-3-pro-preview",
        "toolCalls": [
            {
                "id": "read_file-1777708806000-0",
                "name": "read_file",
                "args": {"absolute_path": f"{WORKDIR}/notes.txt"},
                "status": "executing",
                "timestamp": "2026-05-02T08:00:06.000Z",
            }
        ],
    }
    finished_call = first_reply["toolCalls"][0] | {
        "status": "success",
        "result": [
            {
                "functionResponse": {
                    "id": "read_file-1777708806000-0",
                    "name": "read_file",
                    "response": {"output": "buy milk"},
                }
            }
        ],
    }
    lines: list[dict[str, Any]] = [
        {
            "sessionId": GEMINI_LOG_SESSION,
            "projectHash": PROJECT_HASH,
            "startTime": "2026-05-02T07:59:59.000Z",
            "lastUpdated": "2026-05-02T07:59:59.000Z",
            "kind": "main",
        },
        {
            "id": "u1",
            "timestamp": "2026-05-02T08:00:00.000Z",
            "type": "user",
            "content": [
                {"text": "What does this list say?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
            ],
        },
        {"$set": {"lastUpdated": "2026-05-02T08:00:00.000Z"}},
        first_reply,
        first_reply | {"tokens": {"input": 800, "output": 20, "cached": 0, "thoughts": 9}},
        first_reply
        | {
            "tokens": {"input": 800, "output": 20, "cached": 0, "thoughts": 9},
            "toolCalls": [finished_call],
        },
        {
            "id": "g2",
            "timestamp": "2026-05-02T08:00:09.000Z",
            "type": "gemini",
            "content": "It says: buy eggs.",
            "model": "gemini-3-pro-preview",
        },
        {"id": "i1", "timestamp": "2026-05-02T08:00:10.000Z", "type": "info", "content": "ok"},
        {"$rewindTo": "g2"},  # the user rewound the wrong answer away
        {
            "id": "g3",
            "timestamp": "2026-05-02T08:00:12.000Z",
            "type": "gemini",
            "content": [{"text": "Thinking…", "thought": True}, {"text": "It says: buy milk."}],
            "thoughts": [
                {
                    "subject": "Answering",
                    "description": "The file has one line.",
                    "timestamp": "2026-05-02T08:00:11.000Z",
                }
            ],
            "model": "gemini-3-pro-preview",
        },
        {"$set": {"summary": "What the shopping list says"}},
    ]
    return write_jsonl(
        tmp / PROJECT_HASH / "chats" / "session-2026-05-02T08-00-5b6c7d8e.jsonl", lines
    )


def gemini_subagent_log(tmp: Path) -> Path:
    """``tmp/<hash>/chats/<parent session id>/<id>.jsonl``: a sub-agent's own log."""
    lines: list[dict[str, Any]] = [
        {
            "sessionId": GEMINI_SUBAGENT,
            "projectHash": PROJECT_HASH,
            "startTime": "2026-05-02T08:01:00.000Z",
            "lastUpdated": "2026-05-02T08:01:00.000Z",
            "kind": "subagent",
            "directories": [WORKDIR],
        },
        {
            "id": "s1",
            "timestamp": "2026-05-02T08:01:00.000Z",
            "type": "user",
            "content": [{"text": "Find every TODO in the project."}],
        },
        {
            "id": "s2",
            "timestamp": "2026-05-02T08:01:04.000Z",
            "type": "gemini",
            "content": [{"text": "There are none."}],
            "model": "gemini-3-flash-preview",
        },
    ]
    folder = tmp / PROJECT_HASH / "chats" / GEMINI_LOG_SESSION
    return write_jsonl(folder / f"{GEMINI_SUBAGENT}.jsonl", lines)


CLAUDE_PARENT = "8e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b"
CLAUDE_AGENT = "a3f9c27e81b4d605e"


def claude_code_v2_transcript(projects: Path) -> Path:
    """A Claude Code 2.1 transcript: an image pasted with the question, a web search
    (a server tool with its result block), two replies in a row, and a sub-agent's
    Task call whose conversation is in its own file (see :func:`claude_code_subagent`)."""

    def line(kind: str, uuid: str, at: str, message: Any, **extra: Any) -> dict[str, Any]:
        return (
            _claude_line(kind, uuid, None, at, message)
            | {
                "sessionId": CLAUDE_PARENT,
                "version": "2.1.19",
            }
            | extra
        )

    def reply(ident: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": ident,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-5-20251101",
            "content": blocks,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    lines = [
        line(
            "user",
            "v1",
            "2026-01-10T12:00:00.000Z",
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this screenshot, and is it current?"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                    },
                    {
                        "type": "document",
                        "source": {
                            "type": "base64",
                            "media_type": "application/pdf",
                            "data": "JVBE",
                        },
                    },
                ],
            },
        ),
        line(
            "assistant",
            "v2",
            "2026-01-10T12:00:02.000Z",
            reply("msg_02A", [{"type": "thinking", "thinking": "Look it up.", "signature": "s"}]),
        ),
        line(
            "assistant",
            "v3",
            "2026-01-10T12:00:03.000Z",
            reply(
                "msg_02A",
                [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_01",
                        "name": "web_search",
                        "input": {"query": "notes-app latest release"},
                    }
                ],
            ),
        ),
        line(
            "assistant",
            "v4",
            "2026-01-10T12:00:04.000Z",
            reply(
                "msg_02A",
                [
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_01",
                        "content": [
                            {
                                "type": "web_search_result",
                                "title": "Releases",
                                "url": "https://example.org/notes-app/releases",
                                "encrypted_content": "xyz",
                            }
                        ],
                    }
                ],
            ),
        ),
        line(
            "assistant",
            "v5",
            "2026-01-10T12:00:05.000Z",
            reply("msg_02A", [{"type": "text", "text": "A settings page; 2.0 is current."}]),
        ),
        line(
            "assistant",
            "v6",
            "2026-01-10T12:00:07.000Z",
            reply(
                "msg_02B",
                [
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Anything else?"},
                ],
            ),
        ),
        line(
            "user",
            "v7",
            "2026-01-10T12:00:30.000Z",
            {"role": "user", "content": "Find the TODOs."},
        ),
        line(
            "assistant",
            "v8",
            "2026-01-10T12:00:31.000Z",
            reply(
                "msg_02C",
                [
                    {
                        "type": "tool_use",
                        "id": "toolu_task",
                        "name": "Task",
                        "input": {"subagent_type": "Explore", "prompt": "Find every TODO."},
                    }
                ],
            ),
        ),
        line(
            "user",
            "v9",
            "2026-01-10T12:00:50.000Z",
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_task",
                        "content": [{"type": "text", "text": "No TODO found."}],
                    }
                ],
            },
        ),
    ]
    return write_jsonl(projects / "-home-ada-notes-app" / f"{CLAUDE_PARENT}.jsonl", lines)


def claude_code_subagent(projects: Path) -> Path:
    """``<project>/<parent session>/subagents/agent-<id>.jsonl``: every line a sidechain
    line carrying the parent's ``sessionId`` and the agent's ``agentId``."""

    def line(kind: str, uuid: str, at: str, message: Any) -> dict[str, Any]:
        return _claude_line(kind, uuid, None, at, message) | {
            "sessionId": CLAUDE_PARENT,
            "isSidechain": True,
            "agentId": CLAUDE_AGENT,
            "version": "2.1.19",
        }

    lines = [
        line(
            "user",
            "w1",
            "2026-01-10T12:00:32.000Z",
            {"role": "user", "content": "Find every TODO."},
        ),
        line(
            "assistant",
            "w2",
            "2026-01-10T12:00:40.000Z",
            {
                "id": "msg_03A",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5-20251001",
                "content": [{"type": "text", "text": "No TODO found."}],
            },
        ),
    ]
    folder = projects / "-home-ada-notes-app" / CLAUDE_PARENT / "subagents"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"agent-{CLAUDE_AGENT}.meta.json").write_bytes(
        orjson.dumps({"agentType": "Explore", "description": "Find TODOs"})
    )
    return write_jsonl(folder / f"agent-{CLAUDE_AGENT}.jsonl", lines)


CODEX_RECENT = "019c4e21-7a3b-7c11-9d2e-3f4a5b6c7d8e"


def codex_recent_rollout(sessions: Path) -> Path:
    """A rollout as Codex 0.10x writes it: a ``world_state`` line, a pasted image, a
    web search, a git ghost snapshot, a tool output with an image, and a compaction."""
    lines = [
        _codex(
            "2026-02-20T09:00:00.100Z",
            "session_meta",
            {
                "id": CODEX_RECENT,
                "timestamp": "2026-02-20T09:00:00.000Z",
                "cwd": WORKDIR,
                "originator": "codex_cli_rs",
                "cli_version": "0.104.0",
                "source": "cli",
                "model_provider": "openai",
                "base_instructions": {"text": "You are Codex."},
            },
        ),
        _codex("2026-02-20T09:00:00.200Z", "world_state", {"agents_md": "# AGENTS.md"}),
        _codex(
            "2026-02-20T09:00:01.000Z",
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Why does this page look broken?"},
                    {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ"},
                ],
            },
        ),
        _codex(
            "2026-02-20T09:00:01.100Z",
            "turn_context",
            {"cwd": WORKDIR, "model": "gpt-5.3-codex", "effort": "high"},
        ),
        _codex(
            "2026-02-20T09:00:02.000Z",
            "response_item",
            {"type": "ghost_snapshot", "ghost_commit": {"id": "abc123", "parent": "def456"}},
        ),
        _codex(
            "2026-02-20T09:00:03.000Z",
            "response_item",
            {
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "css grid overflow"},
            },
        ),
        _codex(
            "2026-02-20T09:00:04.000Z",
            "response_item",
            {
                "type": "function_call",
                "name": "view_image",
                "arguments": '{"path":"shot.png"}',
                "call_id": "call_img",
            },
        ),
        _codex(
            "2026-02-20T09:00:04.500Z",
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_img",
                "output": [
                    {"type": "input_text", "text": "attached"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
                ],
            },
        ),
        _codex(
            "2026-02-20T09:00:06.000Z",
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "phase": "final_answer",
                "content": [{"type": "output_text", "text": "The grid overflows."}],
            },
        ),
        _codex(
            "2026-02-20T09:10:00.000Z",
            "compacted",
            {"message": "", "replacement_history": []},
        ),
        _codex(
            "2026-02-20T09:10:01.000Z",
            "response_item",
            {"type": "tool_search_call", "call_id": "ts1", "arguments": {"q": "x"}},
        ),
    ]
    return write_jsonl(
        sessions / "2026" / "02" / "20" / f"rollout-2026-02-20T09-00-00-{CODEX_RECENT}.jsonl",
        lines,
    )
