"""SessionRecorder, without an actor: redaction, answers with their usage, turn ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.pipeline.recording import ChatRecordingService, SessionRecorder
from ollm_cli.pipeline.records import SessionMessage, SessionToolCall, ToolResult
from tests.recording.conftest import make_settings

SECRET = "hunter2-correct-horse-battery"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def _recorder(folder: Path, **settings: object) -> Iterator[SessionRecorder]:
    session = make_settings(folder, **settings)
    store = ChatRecordingService(session, snapshots_dir=folder.parent / "snapshots")
    yield SessionRecorder(store, session)
    store.close()


@pytest.fixture
def recorder(folder: Path) -> Iterator[SessionRecorder]:
    yield from _recorder(folder, redact_secrets=True, auto_save=True, save_delay_ms=60_000)


def test_records_are_redacted_before_they_are_written(recorder: SessionRecorder) -> None:
    assert recorder.add_redaction_values({"DB_PASSWORD": SECRET}) == 1
    sid = recorder.store.create_session("m", "p")
    recorder.record_message(sid, SessionMessage.user(f"the password is {SECRET}"))
    recorder.record_partial(sid, SessionMessage.assistant(f"so far {SECRET}"))
    call = SessionToolCall(
        id="c1", name="shell", args={"cmd": f"echo {SECRET}"}, result=ToolResult(llm_content=SECRET)
    )
    recorder.record_tool_call(sid, call)
    recorder.store.save_session(sid)
    raw = (recorder.store.data_dir / f"{sid}.json").read_text()
    assert SECRET not in raw
    assert "[REDACTED:env:DB_PASSWORD]" in raw


def test_without_redact_secrets_records_are_kept_as_they_are(folder: Path) -> None:
    for recorder in _recorder(folder, redact_secrets=False):
        assert recorder.add_redaction_values({"DB_PASSWORD": SECRET}) == 0
        message = SessionMessage.user(f"the password is {SECRET}")
        assert recorder.redacted(message) is message


def test_an_answer_carries_its_usage_and_the_turn_end(recorder: SessionRecorder) -> None:
    sid = recorder.store.create_session("m", "p")
    recorder.record_message(sid, SessionMessage.user("hello"))
    answer = SessionMessage.assistant("hi there")
    assert recorder.record_answer(
        sid, answer, prompt_tokens=5, completion_tokens=2, turn_end_tokens=9
    )
    session = recorder.store.get_session(sid)
    assert [m.text for m in session.messages] == ["hello", "hi there"]
    meta = session.metadata
    assert (meta.token_count, meta.prompt_tokens, meta.completion_tokens) == (9, 5, 2)
    assert recorder.store.save_pending(sid)  # the turn end asked for a save


def test_an_answer_without_a_turn_end_asks_for_no_save(recorder: SessionRecorder) -> None:
    sid = recorder.store.create_session("m", "p")
    recorder.record_answer(
        sid, SessionMessage.assistant("hi"), prompt_tokens=1, completion_tokens=1
    )
    assert not recorder.store.save_pending(sid)
    assert recorder.store.get_session(sid).metadata.token_count == 2


@pytest.mark.parametrize("auto_save", [True, False])
def test_a_turn_end_saves_later_only_with_auto_save(folder: Path, auto_save: bool) -> None:
    for recorder in _recorder(folder, auto_save=auto_save, save_delay_ms=60_000):
        sid = recorder.store.create_session("m", "p")
        recorder.end_turn(sid, 42)
        assert recorder.store.save_pending(sid) is auto_save
        assert recorder.store.get_session(sid).metadata.token_count == 42


def test_save_and_close_leave_sessions_not_open_here_alone(recorder: SessionRecorder) -> None:
    sid = recorder.store.create_session("m", "p")
    recorder.close_session(sid)
    recorder.save_session(sid)  # closed: nothing to do, no error
    recorder.close_session(sid)
    assert not recorder.store.is_open(sid)
