"""Imports drop no text without a word (issue 35, "fidelity"): Claude Code's sidechain
lines inside a main transcript, a ``tool_result`` whose ``tool_use`` has no ``id``, a
sub-agent file imported on its own under any name, Gemini CLI's notices. Each is
imported, or reported as left out with its reason and count, through the real
``ollm sessions import`` (and ``search``) processes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.importers import read_sessions
from ollm_cli.pipeline.importers._sessions import SessionBuilder, imported_session_id
from ollm_cli.pipeline.records import Session, ToolCallPart, ToolResultPart
from tests.cli.conftest import run_ollm
from tests.importers.tool_files import (
    CLAUDE_AGENT,
    CLAUDE_OLD_SESSION,
    CLAUDE_PARENT,
    GEMINI_LOG_SESSION,
    PROJECT_HASH,
    WORKDIR,
    claude_code_inline_sidechains,
    claude_code_subagent,
    write_jsonl,
)


def imported(*args: str) -> list[dict[str, Any]]:
    """The rows of ``ollm sessions import ARGS --json``, run as a real process."""
    done = run_ollm("import", *args, "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = orjson.loads(done.stdout)
    return rows


def stored(session_id: str) -> Session:
    done = run_ollm("view", session_id, "--json")
    assert done.returncode == 0, done.stderr
    return Session.model_validate(orjson.loads(done.stdout))


def texts_of_file(path: Path) -> set[str]:
    """Every text a Claude Code transcript holds: typed, answered or returned by a tool."""
    found: set[str] = set()
    for raw in path.read_bytes().splitlines():
        content = orjson.loads(raw).get("message", {}).get("content")
        for block in content if isinstance(content, list) else [{"text": content}]:
            value = block.get("text") or block.get("content")
            if isinstance(value, list):
                value = value[0]["text"]
            if isinstance(value, str):
                found.add(value)
    return found


def texts_stored(session: Session) -> set[str]:
    found = {m.text for m in session.messages if m.text}
    found |= {p.content for m in session.messages for p in m.parts if isinstance(p, ToolResultPart)}
    return found


def test_inline_sidechain_lines_become_sub_agent_sessions_and_lose_no_text(
    tmp_path: Path,
) -> None:
    path = claude_code_inline_sidechains(tmp_path / "projects")
    rows = imported("--from", "claude-code", str(path))
    main = imported_session_id("claude-code", CLAUDE_OLD_SESSION)
    assert [r["status"] for r in rows] == ["imported"] * 3
    assert rows[0]["sessionId"] == main and "parentSessionId" not in rows[0]
    assert {r.get("parentSessionId") for r in rows[1:]} == {main}
    sessions = [stored(r["sessionId"]) for r in rows]
    # every text of the file is in one of the three sessions (the sidechains' were lost)
    assert texts_of_file(path) <= set().union(*map(texts_stored, sessions))
    task = sessions[2]
    assert [m.role for m in task.messages] == ["user", "assistant", "tool", "assistant"]
    assert task.tool_calls[0].result.llm_content == "app.py:3: TODO"
    assert CLAUDE_OLD_SESSION in (task.metadata.notes or "")
    found = run_ollm("search", "Grep", "--json")
    assert orjson.loads(found.stdout)[0]["sessionId"] == task.session_id
    # a second import finds all three there
    again = imported("--from", "claude-code", str(path))
    assert [r["status"] for r in again] == ["already imported"] * 3


def test_a_sub_agent_file_under_any_name_is_imported_not_empty(tmp_path: Path) -> None:
    agent_file = claude_code_subagent(tmp_path / "projects")
    flat = tmp_path / "todo-agent.jsonl"  # copied out of its folder, renamed
    shutil.copy(agent_file, flat)
    [row] = imported(str(flat))  # recognised without --from
    assert row["status"] == "imported"
    assert row["parentSessionId"] == imported_session_id("claude-code", CLAUDE_PARENT)
    session = stored(row["sessionId"])
    assert [m.text for m in session.messages] == ["Find every TODO.", "No TODO found."]
    # the same sub-agent as its own file: the same session, not a second one
    [same] = imported("--from", "claude-code", str(agent_file))
    assert same["status"] == "already imported"
    assert same["sessionId"] == row["sessionId"]
    assert same["sourceId"] == f"{CLAUDE_PARENT}/agent-{CLAUDE_AGENT}"


def _claude(kind: str, uuid: str, at: str, content: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": f"msg_{uuid}", "model": "claude-sonnet-4-5-20250929"}
    return {
        "type": kind,
        "uuid": uuid,
        "sessionId": "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a",
        "cwd": WORKDIR,
        "timestamp": f"2025-11-02T10:00:{at}.000Z",
        "isSidechain": False,
        "message": message,
    }


def test_a_tool_result_whose_call_has_no_id_answers_that_call(tmp_path: Path) -> None:
    """Tool blocks without their ids (as a public transcript fixture has them:
    ``{"type": "tool_result", "content": "ok"}``): the calls and results of one reply
    come in order, so each result answers the call waiting before it."""
    calls = [
        {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}},
        {"type": "tool_use", "name": "Read", "input": {"file_path": "notes.txt"}},
    ]
    results = [
        {"type": "tool_result", "content": "notes.txt"},
        {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "buy milk"},
    ]
    path = write_jsonl(
        tmp_path / "no-ids.jsonl",
        [
            _claude("user", "u1", "00", "What is here?"),
            _claude("assistant", "a1", "01", calls),
            _claude("user", "u2", "02", results),
            _claude("assistant", "a2", "03", [{"type": "text", "text": "A shopping list."}]),
        ],
    )
    [row] = imported("--from", "claude-code", str(path))
    session = stored(row["sessionId"])
    asked = [p for m in session.messages for p in m.parts if isinstance(p, ToolCallPart)]
    answered = [p for m in session.messages for p in m.parts if isinstance(p, ToolResultPart)]
    assert [(p.tool_call_id, p.name, p.content) for p in answered] == [
        (asked[0].id, "Bash", "notes.txt"),
        (asked[1].id, "Read", "buy milk"),
    ]
    assert [c.result.llm_content for c in session.tool_calls] == ["notes.txt", "buy milk"]
    viewed = run_ollm("view", row["sessionId"])
    assert "no result recorded" not in viewed.stdout


def test_notices_the_tools_showed_are_left_out_and_counted(tmp_path: Path) -> None:
    log = write_jsonl(
        tmp_path / "tmp" / PROJECT_HASH / "chats" / "session-2026-05-03T09-00-5b6c7d8e.jsonl",
        [
            {
                "sessionId": GEMINI_LOG_SESSION,
                "projectHash": PROJECT_HASH,
                "startTime": "2026-05-03T09:00:00.000Z",
                "lastUpdated": "2026-05-03T09:00:00.000Z",
                "kind": "main",
            },
            {"id": "u1", "timestamp": "2026-05-03T09:00:01.000Z", "type": "user", "content": "hi"},
            {"id": "i1", "timestamp": "2026-05-03T09:00:02.000Z", "type": "info", "content": "a"},
            {
                "id": "w1",
                "timestamp": "2026-05-03T09:00:03.000Z",
                "type": "warning",
                "content": "b",
            },
            {"id": "i2", "timestamp": "2026-05-03T09:00:04.000Z", "type": "info", "content": "c"},
            {
                "id": "g1",
                "timestamp": "2026-05-03T09:00:05.000Z",
                "type": "gemini",
                "content": "yo",
            },
        ],
    )
    claude = write_jsonl(
        tmp_path / "claude.jsonl",
        [
            _claude("user", "u1", "00", "Caveat: generated by local commands.") | {"isMeta": True},
            _claude("user", "u2", "01", "hello"),
            {
                "type": "system",
                "subtype": "local_command",
                "content": "<local-command-stdout>ok</local-command-stdout>",
                "uuid": "s1",
                "sessionId": "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a",
                "timestamp": "2025-11-02T10:00:02.000Z",
            },
            _claude("assistant", "a1", "03", [{"type": "text", "text": "hi"}]),
        ],
    )
    rows = imported(str(log), str(claude))
    assert rows[0]["leftOut"] == {
        "Gemini CLI info notices (shown by Gemini CLI, never sent to its model)": 2,
        "Gemini CLI warning notices (shown by Gemini CLI, never sent to its model)": 1,
    }
    assert sorted(rows[1]["leftOut"].values()) == [1, 1]
    # and for a person (in another home, where it is not imported yet)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    told = run_ollm("import", str(log), env={"OLLM_HOME": str(fresh)})
    assert told.returncode == 0, told.stderr
    assert (
        "Left out of it: 2 Gemini CLI info notices (shown by Gemini CLI, never sent to its model)."
        in told.stderr
    )


def test_the_old_reading_of_a_sidechain_file_named_agent_is_kept(tmp_path: Path) -> None:
    """A sub-agent file whose lines carry no ``agentId`` keeps the id it had."""
    agent_file = claude_code_subagent(tmp_path / "projects")
    lines = [orjson.loads(raw) for raw in agent_file.read_bytes().splitlines()]
    write_jsonl(agent_file, [{k: v for k, v in line.items() if k != "agentId"} for line in lines])
    [(_, session)] = read_sessions(agent_file, "claude-code")
    origin = session.metadata.custom["importedFrom"]
    assert origin["id"] == f"{CLAUDE_PARENT}/agent-{CLAUDE_AGENT}"
    assert session.metadata.title == "Find TODOs"  # from the meta file beside it


steps = st.lists(
    st.tuples(st.sampled_from(["call", "result", "user"]), st.booleans(), st.integers(0, 3)),
    max_size=12,
)


@given(steps)
def test_property_every_tool_result_is_kept_and_answers_a_call_waiting_for_one(
    plan: list[tuple[str, bool, int]],
) -> None:
    """Whatever order calls, results and user words come in, with ids or without:
    every result's text is kept in a tool message; a result that finds its call by id
    answers it; one without an id answers the first call still waiting since the
    user last spoke, when there is one; no call gets two results by position."""
    builder = SessionBuilder(source="claude-code", source_id="x", path=Path("x.jsonl"))
    waiting: list[str] = []
    called: set[str] = set()
    answered_by_position: set[str] = set()
    for number, (kind, with_id, which) in enumerate(plan):
        at = f"2025-01-01T00:00:{number:02d}.000Z"
        if kind == "user":
            builder.say("user", f"words {number}", at)
            waiting.clear()
        elif kind == "call":
            ident = builder.call(f"c{number}" if with_id else None, "tool", {}, at)
            waiting.append(ident)
            called.add(ident)
        else:
            target = f"c{which}" if with_id else None
            expected = None
            if target is not None and target in called:
                expected = target
            elif target is None and waiting:
                expected = waiting[0]
            builder.result(target, f"out {number}", at)
            result = builder.messages[-1].parts[0]
            assert isinstance(result, ToolResultPart) and result.content == f"out {number}"
            if expected is not None:
                assert result.tool_call_id == expected
            if target is None and expected is not None:
                assert expected not in answered_by_position
                answered_by_position.add(expected)
            if result.tool_call_id in waiting:
                waiting.remove(result.tool_call_id)
    outputs = [
        p.content for m in builder.messages for p in m.parts if isinstance(p, ToolResultPart)
    ]
    assert outputs == [f"out {n}" for n, (k, _, _) in enumerate(plan) if k == "result"]
