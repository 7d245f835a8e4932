"""6: a large session is viewed and exported as a stream, never held whole: the streamed
view and exports say exactly what the whole-session ones say."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording import ChatRecordingService, ExportFormat, render
from ollm_cli.pipeline.recording import _stream as session_stream
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
)
from tests.cli.conftest import invoke
from tests.cli.session_strategies import iso, make_session, sessions


def streamed_export(folder: Path, session: Session, fmt: ExportFormat) -> str:
    from ollm_cli.cli.sessions._view import export_chunks

    settings = SessionSettings(data_dir=folder, max_sessions=0)
    with ChatRecordingService(settings) as store:
        sid = (
            store.import_session(session, new_id=False)
            if not store_has(store, session)
            else (session.session_id)
        )
    with ChatRecordingService(settings, read_only=True) as reader:
        streamed = reader.streamed(sid)
        assert streamed is not None
        return "".join(export_chunks(streamed, fmt))


def store_has(store: ChatRecordingService, session: Session) -> bool:
    return store.data_dir.joinpath(f"{session.session_id}.json").exists()


@given(session=sessions())
def test_streamed_exports_say_what_whole_exports_say(
    session: Session, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("stream")
    original = session_stream.STREAM_BYTES
    session_stream.STREAM_BYTES = 0  # stream every session, however small
    try:
        for fmt in (ExportFormat.MARKDOWN, ExportFormat.HTML):
            assert streamed_export(folder, session, fmt) == render(session, fmt)
        as_json = streamed_export(folder, session, ExportFormat.JSON)
        assert Session.model_validate(orjson.loads(as_json)) == session
    finally:
        session_stream.STREAM_BYTES = original


def test_view_of_a_large_session_streams_and_shows_calls_with_results(
    monkeypatch: pytest.MonkeyPatch, open_test_store: object, sessions_dir: Path
) -> None:
    messages = [SessionMessage.user("start"), SessionMessage.assistant("x" * 1000)]
    calls = []
    for n in range(300):
        messages.append(
            SessionMessage(
                role="assistant",
                parts=[TextPart(text=f"step {n}"), ToolCallPart(id=f"c{n}", name="shell")],
                timestamp=iso(n),
            )
        )
        calls.append(
            SessionToolCall(
                id=f"c{n}",
                name="shell",
                result=ToolResult(llm_content=f"output {n}"),
                timestamp=iso(n),
                duration_ms=2.0,
            )
        )
    session = make_session(messages, calls, title="a big one")
    with ChatRecordingService(SessionSettings(data_dir=sessions_dir, max_sessions=0)) as store:
        sid = store.import_session(session)
    monkeypatch.setattr(session_stream, "STREAM_BYTES", 1024)
    loaded: list[str] = []
    monkeypatch.setattr(ChatRecordingService, "get_session", lambda self, s: loaded.append(s))
    outcome = invoke("view", sid[:8])
    assert outcome.exit_code == 0, outcome.stderr
    assert loaded == []  # never read whole
    assert "a big one" in outcome.stdout and "Messages" in outcome.stdout
    assert "302" in outcome.stdout
    assert "output 299" in outcome.stdout and "step 299" in outcome.stdout
    markdown = invoke("export", sid[:8], "--format", "markdown")
    assert markdown.exit_code == 0 and loaded == []
    assert markdown.stdout == render(session, ExportFormat.MARKDOWN)


def test_view_on_a_terminal_pages_and_quitting_the_pager_is_no_error(
    open_test_store: object, sessions_dir: Path, ollm_home: Path
) -> None:
    import os
    import sys

    import pexpect

    session = make_session(
        [SessionMessage.user(f"line {n} of a long chat") for n in range(200)], []
    )
    with ChatRecordingService(SessionSettings(data_dir=sessions_dir, max_sessions=0)) as store:
        sid = store.import_session(session)
    paged = "sh -c 'echo PAGED-BY-THE-TEST; cat'"
    for pager, seen in ((paged, "PAGED-BY-THE-TEST"), ("head -c 64", "Session")):
        child = pexpect.spawn(
            sys.executable,
            ["-c", "from ollm_cli.cli.app import main; main()", "sessions", "view", sid[:8]],
            env={**os.environ, "OLLM_HOME": str(ollm_home), "PAGER": pager, "TERM": "xterm"},
            encoding="utf-8",
            timeout=60,
            dimensions=(40, 120),
        )
        child.expect(seen)
        if pager == paged:
            child.expect("line 199 of a long chat")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, pager


def test_streamed_exports_show_compressions_where_they_happened(tmp_path: Path) -> None:
    from ollm_cli.pipeline.records import CompressionEvent, SessionMetadata

    messages = [
        SessionMessage(role=role, parts=[TextPart(text=f"{role} {n}")], timestamp=iso(n))
        for n, role in enumerate(["user", "assistant"] * 4)
    ]
    history = [
        CompressionEvent(
            timestamp=iso(3), strategy="summarize", tokens_before=900, tokens_after=200
        ),
        CompressionEvent(
            timestamp=iso(60), strategy="truncate", tokens_before=800, tokens_after=90
        ),
    ]
    session = make_session(messages=messages).model_copy(
        update={"metadata": SessionMetadata(compression_history=history)}
    )
    original = session_stream.STREAM_BYTES
    session_stream.STREAM_BYTES = 0
    try:
        for fmt in (ExportFormat.MARKDOWN, ExportFormat.HTML):
            streamed = streamed_export(tmp_path, session, fmt)
            assert streamed == render(session, fmt)
            assert streamed.count("900") == 1 and streamed.count("800") == 1
            assert streamed.index("assistant 3") < streamed.index("900") < streamed.index("user 4")
    finally:
        session_stream.STREAM_BYTES = original
