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
        _claude_line(
            "user",
            "s1",
            "u5",
            "2025-10-01T09:00:07.000Z",
            {"role": "user", "content": "sub-agent prompt"},
        )
        | {"isSidechain": True},
    ]
    return write_jsonl(projects / "-home-ada-notes-app" / f"{CLAUDE_SESSION}.jsonl", lines)


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
