"""What the peers write today, imported whole (issue 23): Gemini CLI's JSONL logs
(and sub-agents), Claude Code's sub-agent files, Codex 0.10x's rollouts; one
message per reply with its own time; placeholders for what is not kept; damaged
lines skipped and counted; a bad file never stops a folder; masked values counted."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.importers import detect_source, read_file, read_sessions
from ollm_cli.pipeline.importers._sessions import imported_session_id
from ollm_cli.pipeline.records import ImagePart, Session, TextPart, ThinkingPart, ToolCallPart
from tests.cli.conftest import invoke
from tests.importers.tool_files import (
    CLAUDE_AGENT,
    CLAUDE_PARENT,
    CODEX_RECENT,
    GEMINI_LOG_SESSION,
    GEMINI_SUBAGENT,
    WORKDIR,
    claude_code_subagent,
    claude_code_transcript,
    claude_code_v2_transcript,
    codex_early_rollout,
    codex_recent_rollout,
    codex_rollout,
    gemini_session,
    gemini_session_log,
    gemini_subagent_log,
    write_jsonl,
)


def only(sessions: list[tuple[Path, Session]]) -> Session:
    assert len(sessions) == 1
    return sessions[0][1]


def kinds(session: Session) -> list[list[str]]:
    return [[p.type for p in m.parts] for m in session.messages]


def placeholders(session: Session) -> list[str]:
    return [
        p.text
        for m in session.messages
        for p in m.parts
        if isinstance(p, TextPart) and p.text.endswith("not imported]")
    ]


# -- Gemini CLI ---------------------------------------------------------------------------


def test_gemini_session_log_is_replayed_one_message_per_reply(tmp_path: Path) -> None:
    path = gemini_session_log(tmp_path / "tmp")
    assert detect_source(path) == "gemini"
    session = only(read_sessions(path))
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    question, first, result, answer = session.messages
    # the user's image is a reference without its bytes; the code part a placeholder
    assert question.text.startswith("What does this list say?")
    [image] = [p for p in question.parts if isinstance(p, ImagePart)]
    assert (image.mime_type, image.url, image.path) == ("image/png", None, None)
    assert placeholders(session) == ["[a Gemini CLI executableCode part: not imported]"]
    # the reply rewritten three times is one message, in its first place, timed when
    # recorded; its thought is its reasoning part; its tokens are counted once
    assert kinds(session)[1] == ["thinking", "tool_call"]
    assert first.timestamp == "2026-05-02T08:00:06.000Z"
    assert first.thinking == "**Reading the file** I will read notes.txt first."
    assert result.parts[0].content == "buy milk"  # type: ignore[union-attr]
    assert session.metadata.prompt_tokens == 800
    # the rewound answer is gone; the one after it keeps its own time
    assert "buy eggs" not in "".join(m.text for m in session.messages)
    assert answer.text == "It says: buy milk."
    assert answer.thinking == "**Answering** The file has one line."
    assert answer.timestamp == "2026-05-02T08:00:12.000Z"
    assert session.metadata.title == "What the shopping list says"
    assert session.start_time == "2026-05-02T07:59:59.000Z"
    assert session.session_id == imported_session_id("gemini", GEMINI_LOG_SESSION)


def test_gemini_recorded_json_keeps_thoughts_in_their_reply_at_its_time(tmp_path: Path) -> None:
    session = only(read_sessions(gemini_session(tmp_path / "tmp")))
    reply = session.messages[1]
    assert [p.type for p in reply.parts] == ["thinking", "tool_call"]
    assert reply.timestamp == "2025-09-01T10:00:05.000Z"  # not the thought's 10:00:02


def test_gemini_subagent_log_is_its_own_session_naming_its_parent(tmp_path: Path) -> None:
    path = gemini_subagent_log(tmp_path / "tmp")
    session = only(read_sessions(path, "gemini"))
    assert [m.text for m in session.messages] == [
        "Find every TODO in the project.",
        "There are none.",
    ]
    origin = session.metadata.custom["importedFrom"]
    assert origin["parent"] == GEMINI_LOG_SESSION
    assert origin["parentSessionId"] == imported_session_id("gemini", GEMINI_LOG_SESSION)
    assert GEMINI_LOG_SESSION in (session.metadata.notes or "")
    assert session.session_id == imported_session_id("gemini", GEMINI_SUBAGENT)


def test_gemini_default_folder_imports_logs_sub_agents_and_old_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    tmp = tmp_path / "home" / ".gemini" / "tmp"
    gemini_session_log(tmp)
    gemini_subagent_log(tmp)
    gemini_session(tmp)
    outcome = invoke("import", "--from", "gemini", "--json")
    assert outcome.exit_code == 0, outcome.stderr
    rows = orjson.loads(outcome.stdout)
    assert sorted(Path(r["file"]).suffix for r in rows) == [".json", ".jsonl", ".jsonl"]
    assert {r["status"] for r in rows} == {"imported"}


def test_gemini_log_migrated_beside_its_json_is_one_session(tmp_path: Path) -> None:
    """Resuming an old session makes Gemini CLI write ``session-x.jsonl`` beside
    ``session-x.json``: the longer, later one is imported, the other named as the same."""
    old = gemini_session(tmp_path / "tmp")
    record = orjson.loads(old.read_bytes())
    messages = record.pop("messages")
    later = {
        "id": "m5",
        "timestamp": "2025-09-02T10:00:00.000Z",
        "type": "user",
        "content": "And now?",
    }
    log = old.with_suffix(".jsonl")
    log.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [record, *messages, later]))
    outcome = invoke("import", str(old.parent), "--json")
    assert outcome.exit_code == 0, outcome.stderr
    rows = {Path(r["file"]).suffix: r for r in orjson.loads(outcome.stdout)}
    assert rows[".jsonl"]["status"] == "imported"
    assert (rows[".json"]["status"], rows[".json"]["sameAs"]) == ("same session as", str(log))


def test_a_damaged_gemini_log_line_is_skipped_and_the_format_still_recognised(
    tmp_path: Path,
) -> None:
    path = gemini_session_log(tmp_path / "tmp")
    lines = path.read_bytes().splitlines()
    metadata = lines[0]
    lines[0] = metadata[:40]  # the metadata line cut short…
    lines.insert(1, metadata)  # …and written again whole, as a resumed session does
    lines[5] = b'{"id": "g1", "timest'
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert detect_source(path) == "gemini"
    outcome = read_file(path, None)
    assert outcome.error is None
    assert outcome.damaged_lines == [1, 6]
    [session] = outcome.sessions
    assert session.messages[-1].text == "It says: buy milk."
    strict = read_file(path, None, strict=True)
    assert strict.error is not None and f"{path}: line 1: not JSON" in strict.error.message
    assert "without --strict" in (strict.error.hint or "")


def test_the_gemini_log_of_the_issue_was_refused_before_and_is_imported_now(
    tmp_path: Path,
) -> None:
    path = gemini_session_log(tmp_path / "tmp")
    outcome = invoke("import", str(path))
    assert outcome.exit_code == 0, outcome.stderr
    assert f"Imported gemini session {GEMINI_LOG_SESSION}" in outcome.stdout
    assert "not JSON" not in outcome.stderr


# -- Claude Code --------------------------------------------------------------------------


def test_claude_code_reply_per_message_id_with_images_and_web_search(tmp_path: Path) -> None:
    path = claude_code_v2_transcript(tmp_path / "projects")
    session = only(read_sessions(path))
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    question = session.messages[0]
    [image] = [p for p in question.parts if isinstance(p, ImagePart)]
    assert image.mime_type == "image/png"
    assert "[a Claude Code document block: not imported]" in placeholders(session)
    search = session.messages[1]
    [call] = search.tool_calls
    assert (call.name, call.args) == ("web_search", {"query": "notes-app latest release"})
    assert search.timestamp == "2026-01-10T12:00:02.000Z"
    found = session.messages[2].parts[0]
    assert "https://example.org/notes-app/releases" in found.content  # type: ignore[union-attr]
    assert session.messages[3].text == "A settings page; 2.0 is current."
    # the next message id is the next reply, even with no tool result between them
    second = session.messages[4]
    assert second.timestamp == "2026-01-10T12:00:07.000Z"
    assert second.text == "Anything else?"
    assert second.thinking == "[Claude Code's redacted reasoning: not imported]"
    assert session.model == "claude-opus-4-5-20251101"


def test_claude_code_subagent_file_is_its_own_session_linked_to_its_parent(
    tmp_path: Path,
) -> None:
    projects = tmp_path / "projects"
    claude_code_v2_transcript(projects)
    agent = claude_code_subagent(projects)
    assert detect_source(agent) == "claude-code"
    found = dict((p, s) for p, s in read_sessions(projects, "claude-code"))
    assert len(found) == 2
    sub = found[agent]
    assert [m.text for m in sub.messages] == ["Find every TODO.", "No TODO found."]
    origin = sub.metadata.custom["importedFrom"]
    assert origin["id"] == f"{CLAUDE_PARENT}/agent-{CLAUDE_AGENT}"
    assert origin["parentSessionId"] == imported_session_id("claude-code", CLAUDE_PARENT)
    parent = next(s for p, s in found.items() if p != agent)
    assert parent.session_id == origin["parentSessionId"]
    assert f"A sub-agent (Explore) of Claude Code session {CLAUDE_PARENT}" in (
        sub.metadata.notes or ""
    )
    assert sub.metadata.title == "Find TODOs"  # from agent-<id>.meta.json beside it
    assert sub.model == "claude-haiku-4-5-20251001"


def test_cli_imports_the_subagents_of_a_project_folder_and_says_whose_they_are(
    tmp_path: Path,
) -> None:
    projects = tmp_path / "projects"
    claude_code_v2_transcript(projects)
    claude_code_subagent(projects)
    outcome = invoke("import", str(projects))
    assert outcome.exit_code == 0, outcome.stderr
    assert "No sessions found" not in outcome.stderr
    parent = imported_session_id("claude-code", CLAUDE_PARENT)
    assert f"It is a sub-agent of session {parent}." in outcome.stdout
    assert "left alone" not in outcome.stderr  # its meta.json is read with it, not skipped
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 2


# -- Codex --------------------------------------------------------------------------------


def test_codex_recent_rollout_keeps_images_web_searches_and_compactions(tmp_path: Path) -> None:
    path = codex_recent_rollout(tmp_path / "sessions")
    session = only(read_sessions(path))
    assert session.session_id == imported_session_id("codex", CODEX_RECENT)
    assert session.start_time == "2026-02-20T09:00:00.000Z"
    assert session.model == "gpt-5.3-codex"
    assert session.metadata.custom["importedFrom"]["version"] == "0.104.0"
    question = session.messages[0]
    assert question.text == "Why does this page look broken?"
    [image] = [p for p in question.parts if isinstance(p, ImagePart)]
    assert image.mime_type == "image/jpeg" and image.url is None
    calls = [p for m in session.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert [(c.name, c.args.get("query")) for c in calls] == [
        ("web_search", "css grid overflow"),
        ("view_image", None),
    ]
    output = session.tool_calls[0].result.llm_content
    assert "attached" in output and "[image (image/png): not imported]" in output
    assert "base64" not in output
    assert "[Codex compacted the conversation here: not imported]" in placeholders(session)
    assert "[a Codex tool_search_call item: not imported]" in placeholders(session)
    assert "ghost" not in orjson.dumps([m.to_dict() for m in session.messages]).decode()


def test_a_codex_compaction_summary_is_kept_as_a_system_message(tmp_path: Path) -> None:
    path = codex_rollout(tmp_path / "sessions")
    compacted = {
        "timestamp": "2025-10-29T01:30:00.000Z",
        "type": "compacted",
        "payload": {"message": "The user listed the files."},
    }
    path.write_bytes(path.read_bytes() + orjson.dumps(compacted) + b"\n")
    last = only(read_sessions(path)).messages[-1]
    assert (last.role, last.timestamp) == ("system", "2025-10-29T01:30:00.000Z")
    assert last.text.endswith("The user listed the files.")


def test_codex_early_rollout_is_timed_from_its_header(tmp_path: Path) -> None:
    session = only(read_sessions(codex_early_rollout(tmp_path / "sessions")))
    assert session.start_time == "2025-05-07T17:24:21.123Z"
    assert {m.timestamp for m in session.messages} == {"2025-05-07T17:24:21.123Z"}


def test_codex_reasoning_after_a_call_starts_the_next_reply(tmp_path: Path) -> None:
    session = only(read_sessions(codex_rollout(tmp_path / "sessions")))
    assert [[p.type for p in m.parts] for m in session.messages][1] == ["thinking", "tool_call"]
    assert all(
        not isinstance(m.parts[0], ThinkingPart) or m.role == "assistant" for m in session.messages
    )


# -- folders, bad files, redaction --------------------------------------------------------


def test_a_folder_import_goes_past_a_bad_file_and_reports_every_file(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    good = codex_rollout(sessions)
    recent = codex_recent_rollout(sessions)
    bad = sessions / "2026" / "03" / "01" / "rollout-2026-03-01T00-00-00-broken.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b'\x00\x01 not a rollout\n{"half": \n')
    outcome = invoke("import", "--from", "codex", str(sessions), "--json")
    assert outcome.exit_code == 4
    rows = {r["file"]: r for r in orjson.loads(outcome.stdout)}
    assert rows[str(good)]["status"] == rows[str(recent)]["status"] == "imported"
    assert rows[str(bad)]["status"] == "failed"
    assert "line 1" in rows[str(bad)]["error"]
    assert "does not look like" in rows[str(bad)]["hint"]
    assert "1 of 3 files could not be imported" in outcome.stderr
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 2

    said = invoke("import", "--from", "codex", str(sessions))
    assert said.exit_code == 4
    assert f"Not imported: {bad}: line 1" in said.stderr
    assert "2 session(s) were already imported" in said.stderr


def test_an_import_says_how_many_values_it_masked_and_no_redact_keeps_them(
    tmp_path: Path, ollm_home: Path
) -> None:
    secret = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
    path = gemini_session_log(tmp_path / "tmp")
    path.write_text(path.read_text().replace("buy milk", f"buy milk with {secret}"))
    outcome = invoke("import", str(path), "--json")
    assert outcome.exit_code == 0, outcome.stderr
    [row] = orjson.loads(outcome.stdout)
    assert row["masked"] == 2  # in the tool result and in the answer
    invoke("delete", row["sessionId"], "--yes")
    said = invoke("import", str(path))
    assert "Masked 2 secret value(s)" in said.stderr
    assert "--no-redact" in said.stderr

    kept_home = tmp_path / "other"
    other = gemini_session_log(kept_home)
    raw = other.read_text().replace("buy milk", f"buy milk with {secret}")
    other.write_text(raw.replace(GEMINI_LOG_SESSION, "11111111-2222-4333-8444-555555555555"))
    kept = invoke("import", str(other), "--no-redact")
    assert kept.exit_code == 0, kept.stderr
    assert "Secrets were not masked" in kept.stderr
    stored = [p.read_bytes() for p in ollm_home.rglob("*") if p.is_file()]
    assert any(secret.encode() in data for data in stored)


def test_import_help_documents_strict_and_no_redact() -> None:
    shown = invoke("import", "--help")
    assert "--strict" in shown.stdout and "--no-redact" in shown.stdout


def test_working_folder_of_a_subagent_is_kept(tmp_path: Path) -> None:
    agent = claude_code_subagent(tmp_path / "projects")
    assert only(read_sessions(agent)).metadata.working_dir == WORKDIR


def test_a_gemini_log_named_as_claude_code_is_refused_naming_gemini(tmp_path: Path) -> None:
    path = gemini_session_log(tmp_path / "tmp")
    outcome = read_file(path, "claude-code")
    assert outcome.error is not None and not outcome.sessions
    assert "looks like a Gemini CLI file: pass --from gemini" in (outcome.error.hint or "")
    said = invoke("import", "--from", "claude-code", str(path))
    assert said.exit_code == 4
    assert "--from gemini" in said.stderr


def test_damaged_lines_of_every_kind_are_skipped_by_number(tmp_path: Path) -> None:
    claude = claude_code_transcript(tmp_path / "projects")
    lines = claude.read_bytes().splitlines()
    lines[1:1] = [
        b'{"type": "user", "uuid": "x1", "sessionId": "s"',  # cut short
        b"[1, 2, 3]",  # not an object
        b'{"uuid": "x2", "note": "no type"}',
        b'{"type": "user", "uuid": "x3", "sessionId": "s"}',  # no message
    ]
    claude.write_bytes(b"\n".join(lines) + b"\n")
    outcome = read_file(claude, "claude-code")
    assert outcome.error is None
    assert outcome.damaged_lines == [2, 3, 4, 5]
    [session] = outcome.sessions
    assert session.messages[-1].text == "It says: buy milk."

    codex = codex_rollout(tmp_path / "sessions")
    lines = codex.read_bytes().splitlines()
    lines[2:2] = [
        b'{"timestamp": "2025-10-29T00:59:38.320Z", "type": "response_item", "payload": "x"}',
        b'{"neither": "type nor payload"}',
        b'{"timestamp": "2025-10-29T00:59:38.320Z", "type": "later_kind", "payload": {}}',
    ]
    codex.write_bytes(b"\n".join(lines) + b"\n")
    outcome = read_file(codex, None)
    assert (outcome.error, outcome.damaged_lines) == (None, [3, 4])  # a later kind is not damage
    assert outcome.sessions[0].messages[0].text == "List the files here."


def test_images_of_each_tool_are_references_never_bytes() -> None:
    from ollm_cli.pipeline.importers._content import image_of

    anthropic_url = image_of(
        {"type": "image", "source": {"type": "url", "url": "https://e.org/a.png"}}
    )
    assert anthropic_url == ImagePart(url="https://e.org/a.png")
    openai = image_of({"type": "input_image", "image_url": {"url": "data:image/webp;base64,UklG"}})
    assert openai == ImagePart(mime_type="image/webp")
    gemini_file = image_of({"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://b/c.jpg"}})
    assert gemini_file == ImagePart(url="gs://b/c.jpg", mime_type="image/jpeg")
    assert (
        image_of({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/c.pdf"}}) is None
    )
    assert image_of({"inlineData": {"mimeType": "audio/wav", "data": "UklG"}}) is None
    assert image_of({"type": "text", "text": "no"}) is None


def test_calls_without_an_id_get_the_same_made_up_id_every_import(tmp_path: Path) -> None:
    path = codex_recent_rollout(tmp_path / "sessions")
    first, second = (only(read_sessions(path)) for _ in range(2))
    assert first.messages[1].tool_calls[0].id == "imported_call_1"
    assert first.to_json() == second.to_json()


def test_files_no_tool_wrote_are_counted_not_silently_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    codex_rollout(folder)
    (folder / "notes.jsonl").write_bytes(b'{"a": 1}\n')
    (folder / "settings.json").write_bytes(b"{}")
    listed = invoke("import", str(folder), "--json")
    assert listed.exit_code == 0, listed.stderr
    statuses = sorted(r["status"] for r in orjson.loads(listed.stdout))
    assert statuses == ["imported", "not recognised", "not recognised"]
    said = invoke("import", str(folder))
    assert "2 file(s) there are no session of Claude Code, Codex, Gemini CLI or llm" in said.stderr


def test_a_claude_reply_interleaving_reasoning_and_calls_stays_one_message(
    tmp_path: Path,
) -> None:
    reply = {"id": "msg_I", "role": "assistant", "model": "claude-opus-4-5"}
    blocks = [
        {"type": "thinking", "thinking": "First look."},
        {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {}},
        {"type": "thinking", "thinking": "Then search."},
        {"type": "tool_use", "id": "toolu_b", "name": "Grep", "input": {}},
    ]
    lines = [
        {
            "type": "user",
            "uuid": "q",
            "sessionId": "s1",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": "go"},
        },
    ] + [
        {
            "type": "assistant",
            "uuid": f"l{i}",
            "sessionId": "s1",
            "timestamp": f"2026-01-01T00:00:0{i + 1}Z",
            "message": reply | {"content": [block]},
        }
        for i, block in enumerate(blocks)
    ]
    path = write_jsonl(tmp_path / "p" / "s1.jsonl", lines)
    session = only(read_sessions(path, "claude-code"))
    assert kinds(session) == [["text"], ["thinking", "tool_call", "thinking", "tool_call"]]
    assert session.messages[1].timestamp == "2026-01-01T00:00:01Z"


def test_lines_with_lone_surrogates_are_kept_and_too_deep_lines_skipped(tmp_path: Path) -> None:
    """A cut emoji leaves a lone surrogate escape (valid JSON orjson refuses); a line
    nested deeper than OLLM can store is damage, not a crash of the whole import."""
    path = codex_rollout(tmp_path / "sessions")
    cut = (
        b'{"timestamp": "2025-10-29T00:59:42.000Z", "type": "response_item", "payload": '
        b'{"type": "message", "role": "user", "content": [{"type": "input_text", '
        b'"text": "thanks \\ud83d"}]}}'
    )
    deep = json.dumps(  # orjson itself refuses to write it
        {
            "timestamp": "2025-10-29T00:59:43.000Z",
            "type": "response_item",
            "payload": {"type": "function_call", "name": "x", "call_id": "d", "arguments": "{}"}
            | {"extra": json_nested(300)},
        }
    ).encode()
    tokens = orjson.dumps(
        {
            "timestamp": "2025-10-29T00:59:44.000Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {"total_token_usage": {"input_tokens": "n/a"}},
            },
        }
    )
    deep_args = orjson.dumps(
        {
            "timestamp": "2025-10-29T00:59:45.000Z",
            "type": "response_item",
            "payload": {"type": "function_call", "name": "deep", "call_id": "e"}
            | {"arguments": json.dumps(json_nested(300))},
        }
    )
    path.write_bytes(path.read_bytes() + b"\n".join([cut, deep, tokens, deep_args]) + b"\n")
    outcome = read_file(path, "codex")
    assert outcome.error is None
    assert outcome.damaged_lines == [12]
    [session] = outcome.sessions
    assert session.messages[-2].text == "thanks \ufffd"
    [call] = session.messages[-1].tool_calls
    assert call.args["input"].startswith("[[[")  # the text, not 300 levels of lists
    assert session.metadata.prompt_tokens == 0
    imported = invoke("import", str(path), "--json")
    assert imported.exit_code == 0, imported.stderr


def json_nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def test_a_session_too_deep_to_store_fails_alone(tmp_path: Path) -> None:
    """An old Gemini CLI record holds its arguments as JSON, so no line check sees them."""
    folder = tmp_path / "tmp"
    good = gemini_session_log(folder)
    old = gemini_session(folder)
    record = orjson.loads(old.read_bytes())
    record["messages"][1]["toolCalls"][0]["args"] = {"deep": json_nested(300)}
    old.write_text(json.dumps(record))
    outcome = invoke("import", str(folder), "--json")
    assert outcome.exit_code == 4
    rows = {r["file"]: r for r in orjson.loads(outcome.stdout)}
    assert rows[str(good)]["status"] == "imported"
    assert rows[str(old)]["status"] == "failed"
    assert "nested too deeply" in rows[str(old)]["error"]
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 1


def test_a_gemini_log_without_its_metadata_line_is_named_as_gemini_cut_short(
    tmp_path: Path,
) -> None:
    path = gemini_session_log(tmp_path / "tmp")
    lines = path.read_bytes().splitlines()
    lines[0] = lines[0][:30]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert detect_source(path) == "gemini"
    outcome = read_file(path, None)
    assert outcome.error is not None
    assert "no session metadata line" in outcome.error.message
    assert "looks like a Gemini CLI file, but lacks" in (outcome.error.hint or "")
