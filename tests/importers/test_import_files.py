"""``ollm sessions import --from claude-code|codex|gemini``: messages, tool calls with
arguments and results, reasoning, timestamps, model and working folder kept; the
source and its id in ``metadata.custom``; a second import creates nothing; a bad
file is named with its line."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.importers import detect_source, read_sessions
from ollm_cli.pipeline.importers._reading import ImportFormatError
from ollm_cli.pipeline.records import Session, ThinkingPart, ToolCallPart, ToolResultPart
from tests.cli.conftest import invoke
from tests.importers.tool_files import (
    CLAUDE_SESSION,
    CODEX_SESSION,
    GEMINI_SESSION,
    WORKDIR,
    claude_code_transcript,
    codex_early_rollout,
    codex_rollout,
    gemini_checkpoint,
    gemini_session,
)


def only(sessions: list[tuple[Path, Session]]) -> Session:
    assert len(sessions) == 1
    return sessions[0][1]


def roles(session: Session) -> list[str]:
    return [m.role for m in session.messages]


def test_claude_code_transcript_keeps_the_conversation(tmp_path: Path) -> None:
    path = claude_code_transcript(tmp_path / "projects")
    session = only(read_sessions(path, "claude-code"))
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    assert session.messages[0].text == "What is in notes.txt?"
    thinking, call = session.messages[1].parts
    assert isinstance(thinking, ThinkingPart) and thinking.text == "I should read it."
    assert isinstance(call, ToolCallPart)
    assert (call.id, call.name, call.args) == (
        "toolu_01",
        "Read",
        {"file_path": f"{WORKDIR}/notes.txt"},
    )
    result = session.messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert (result.tool_call_id, result.content) == ("toolu_01", "     1→buy milk\n")
    assert session.messages[3].text == "It says: buy milk."
    assert session.start_time == "2025-10-01T09:00:00.000Z"
    assert session.last_activity == "2025-10-01T09:00:06.000Z"
    assert session.model == "claude-sonnet-4-5-20250929"
    assert session.metadata.working_dir == WORKDIR
    assert session.metadata.title == "Reading the shopping notes"
    # each streamed message's usage counted once
    assert (session.metadata.prompt_tokens, session.metadata.completion_tokens) == (300, 53)
    [tool_call] = session.tool_calls
    assert tool_call.result.llm_content == "     1→buy milk\n"
    assert tool_call.duration_ms == 1500
    assert session.metadata.custom["importedFrom"]["tool"] == "claude-code"
    assert session.metadata.custom["importedFrom"]["id"] == CLAUDE_SESSION


def test_codex_rollout_keeps_the_conversation(tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "sessions")
    session = only(read_sessions(path, "codex"))
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    assert session.messages[0].text == "List the files here."  # the injected context is not
    assert session.messages[1].thinking == "**Listing files**"
    [call] = session.messages[1].tool_calls
    assert (call.id, call.name) == ("call_abc", "shell")
    assert call.args == {"command": ["ls", "-1"], "workdir": "/home/ada/notes-app"}
    assert "notes.txt" in session.tool_calls[0].result.llm_content
    assert session.messages[3].text == "notes.txt and README.md."
    assert session.model == "gpt-5-codex"
    assert session.metadata.working_dir == WORKDIR
    assert session.metadata.thinking_tokens == 20
    assert session.metadata.custom["importedFrom"]["id"] == CODEX_SESSION
    assert session.start_time == "2025-10-29T00:59:38.308Z"  # the header's own time


def test_codex_early_rollout_is_read_too(tmp_path: Path) -> None:
    path = codex_early_rollout(tmp_path / "sessions")
    assert detect_source(path) == "codex"
    session = only(read_sessions(path))
    assert [m.text for m in session.messages] == ["hello", "Hi! How can I help?"]
    assert session.metadata.custom["importedFrom"]["id"] == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"


def test_gemini_recorded_session_keeps_the_conversation(tmp_path: Path) -> None:
    path = gemini_session(tmp_path / "tmp")
    session = only(read_sessions(path, "gemini"))
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    assert session.messages[1].thinking == "**Counting lines** I will run wc."
    [call] = session.messages[1].tool_calls
    assert call.args == {"command": "wc -l notes.txt"}
    assert session.messages[2].parts[0].content == "1 notes.txt"  # type: ignore[union-attr]
    assert session.messages[3].text == "notes.txt has 1 line."
    assert session.model == "gemini-2.5-pro"
    assert session.metadata.thinking_tokens == 12
    assert session.metadata.custom["importedFrom"]["id"] == GEMINI_SESSION
    assert session.tool_calls[0].success is True


def test_gemini_saved_chat_matches_results_to_calls_by_name(tmp_path: Path) -> None:
    path = gemini_checkpoint(tmp_path / "tmp")
    session = only(read_sessions(path))
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    [call] = session.messages[1].tool_calls
    result = session.messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.tool_call_id == call.id
    assert result.content == "buy milk"


def test_cli_imports_each_tool_once_and_a_second_import_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    claude_code_transcript(tmp_path / "home" / ".claude" / "projects")
    codex_rollout(tmp_path / "home" / ".codex" / "sessions")
    gemini_session(tmp_path / "home" / ".gemini" / "tmp")
    for tool in ("claude-code", "codex", "gemini"):  # the default locations
        first = invoke("import", "--from", tool, "--json")
        assert first.exit_code == 0, first.stderr
        assert [row["status"] for row in orjson.loads(first.stdout)] == ["imported"]
    listed = invoke("list", "--json")
    assert len(orjson.loads(listed.stdout)) == 3
    again = invoke("import", str(tmp_path / "home"), "--json")  # recognised, not named
    assert again.exit_code == 0, again.stderr
    assert sorted(row["status"] for row in orjson.loads(again.stdout)) == ["already imported"] * 3
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 3
    shown = invoke("search", "milk", "--json")
    assert shown.exit_code == 0 and "milk" in shown.stdout


def test_a_damaged_line_is_skipped_and_named_and_strict_refuses_the_file(
    tmp_path: Path,
) -> None:
    path = codex_rollout(tmp_path / "sessions")
    lines = path.read_bytes().splitlines()
    lines[2] = b'{"timestamp": "2025-10-29T00:59:38.320Z", "type": "response_item", "payl'
    path.write_bytes(b"\n".join(lines) + b"\n")

    strict = invoke("import", "--from", "codex", "--strict", str(path))
    assert strict.exit_code == 4
    assert f"{path}: line 3: not JSON" in strict.stderr
    assert invoke("list", "--json").stdout.strip() in ("[]", "")

    outcome = invoke("import", "--from", "codex", str(path), "--json")
    assert outcome.exit_code == 0, outcome.stderr
    [row] = orjson.loads(outcome.stdout)
    assert (row["status"], row["skippedLines"]) == ("imported", [3])
    said = invoke("import", "--from", "codex", str(path))
    assert "1 damaged line(s) skipped: 3" in said.stderr + said.stdout


def test_a_file_of_another_format_is_named_with_the_format_it_looks_like(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError) as caught:
        read_sessions(gemini_session(tmp_path / "g"), "claude-code")
    assert "line 1" in caught.value.message
    assert "looks like a Gemini CLI file: pass --from gemini" in (caught.value.hint or "")

    rollout = codex_rollout(tmp_path / "c")
    with pytest.raises(ImportFormatError) as caught:
        read_sessions(rollout, "gemini")
    assert str(rollout) in caught.value.message
    assert "looks like a Codex file" in (caught.value.hint or "")
    with pytest.raises(ImportFormatError) as caught:
        read_sessions(rollout, "llm")
    assert "not an SQLite database" in caught.value.message
    assert invoke("list", "--json").stdout.strip() in ("[]", "")


def test_ollm_own_session_files_keep_the_plain_import(tmp_path: Path) -> None:
    path = claude_code_transcript(tmp_path / "projects")
    [(_, session)] = read_sessions(path)
    exported = tmp_path / "mine.json"
    exported.write_bytes(session.to_json())
    assert detect_source(exported) == "ollm"
    outcome = invoke("import", str(exported), "--new-id", "--json")
    assert outcome.exit_code == 0, outcome.stderr
    assert orjson.loads(outcome.stdout)[0]["sessionId"] != session.session_id


def test_imported_reasoning_is_shown_folded_by_sessions_view(tmp_path: Path) -> None:
    path = claude_code_transcript(tmp_path / "projects")
    imported = invoke("import", str(path), "--json")
    assert imported.exit_code == 0, imported.stderr
    [row] = orjson.loads(imported.stdout)
    viewed = invoke("view", row["sessionId"][:8])
    assert viewed.exit_code == 0, viewed.stderr
    assert "reasoning (" in viewed.stdout and "I should read it." in viewed.stdout
    assert "this version does not display" not in viewed.stdout


def test_import_without_paths_or_a_tool_says_what_to_give() -> None:
    outcome = invoke("import")
    assert outcome.exit_code == 4
    assert "--from" in outcome.stderr


def test_a_missing_default_location_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    outcome = invoke("import", "--from", "codex")
    assert outcome.exit_code == 4
    assert str(tmp_path / ".codex" / "sessions") in outcome.stderr


def test_secrets_in_imported_sessions_are_redacted(tmp_path: Path, ollm_home: Path) -> None:
    secret = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    path = claude_code_transcript(tmp_path / "projects")
    path.write_text(path.read_text().replace("buy milk", f"token {secret}"))
    outcome = invoke("import", "--from", "claude-code", str(path))
    assert outcome.exit_code == 0, outcome.stderr
    stored = [p for p in ollm_home.rglob("*") if p.is_file()]
    assert stored
    assert all(secret.encode() not in p.read_bytes() for p in stored)


@pytest.mark.parametrize("named", [True, False])
def test_a_fifo_is_refused_at_once_never_opened(tmp_path: Path, named: bool) -> None:
    """Opening a FIFO waits for a writer: neither recognising nor reading may open one."""
    fifo = tmp_path / "rollout-x.jsonl"
    os.mkfifo(fifo)
    assert detect_source(fifo) is None
    with pytest.raises(ImportFormatError, match="not a regular file"):
        read_sessions(fifo, "codex")
    outcome = invoke("import", *(["--from", "codex"] if named else []), str(fifo))
    assert outcome.exit_code == 4, outcome
    shown = outcome.stderr + outcome.stdout + str(outcome.exception or "")
    assert "FIFO" in shown or "not a regular file" in shown
