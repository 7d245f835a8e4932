"""Forking a session: a new, complete session holding a prefix; the original untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ollm_cli.pipeline.errors import SessionError, SessionNotFoundError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import (
    CompressionCheckpoint,
    CompressionEvent,
    Session,
    SessionMessage,
    SessionToolCall,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)
from tests.recording.conftest import make_settings


def _tool_turn(store: ChatRecordingService, sid: str, call_id: str, text: str) -> None:
    store.record_message(sid, SessionMessage.user(f"please {text}"))
    ask = SessionMessage(
        role="assistant", parts=[ToolCallPart(id=call_id, name="shell", args={"command": text})]
    )
    store.record_message(sid, ask)
    store.record_tool_call(
        sid,
        SessionToolCall(
            id=call_id, name="shell", args={"command": text}, result=ToolResult(llm_content="ok")
        ),
    )
    answer = ToolResultPart(tool_call_id=call_id, name="shell", content="ok")
    store.record_message(sid, SessionMessage(role="tool", parts=[answer]))
    store.record_message(sid, SessionMessage.assistant(f"did {text}"))


def _session(store: ChatRecordingService) -> str:
    sid = store.create_session("m", "simulated", title="parent")
    _tool_turn(store, sid, "c1", "one")
    _tool_turn(store, sid, "c2", "two")
    store.save_session(sid)
    return sid


def test_fork_keeps_the_prefix_with_its_tool_calls_and_timestamps(
    store: ChatRecordingService,
) -> None:
    sid = _session(store)
    parent = store.get_session(sid)
    result = store.fork_session(sid, at=4)
    fork = store.get_session(result.session_id)
    assert result.session_id != sid
    assert fork.messages == parent.messages[:4]
    assert [c.id for c in fork.tool_calls] == ["c1"]
    assert fork.metadata.model_extra is not None
    assert fork.metadata.model_extra["forkedFrom"] == {"sessionId": sid, "messageIndex": 4}
    assert fork.metadata.title == "parent"
    assert store.get_session(sid) == parent  # the original is untouched
    assert result.cut_at == parent.messages[4].timestamp


def test_fork_of_everything_by_default_and_the_family_is_listed(
    store: ChatRecordingService,
) -> None:
    sid = _session(store)
    result = store.fork_session(sid, title="other way")
    fork = store.get_session(result.session_id)
    assert len(fork.messages) == 8 and len(fork.tool_calls) == 2
    assert fork.metadata.title == "other way" and fork.metadata.title_source == "manual"
    assert store.forks_of(sid) == [result.session_id]
    listed = {s.session_id: s for s in store.list_sessions()}
    assert listed[result.session_id].forked_from == sid
    assert listed[sid].forked_from is None


def test_fork_keeps_only_the_compressions_within_the_prefix(store: ChatRecordingService) -> None:
    sid = _session(store)
    parent = store.get_session(sid)
    early = CompressionEvent(
        timestamp=parent.messages[3].timestamp,
        strategy="summarize",
        tokens_before=100,
        tokens_after=10,
        checkpoint=CompressionCheckpoint(summary="s", covers_through=2),
    )
    late = CompressionEvent(
        timestamp=parent.messages[7].timestamp,
        strategy="summarize",
        tokens_before=200,
        tokens_after=20,
        checkpoint=CompressionCheckpoint(summary="t", covers_through=6),
    )
    store.record_compression(sid, early)
    store.record_compression(sid, late)
    fork = store.get_session(store.fork_session(sid, at=5).session_id)
    assert [
        e.checkpoint.covers_through for e in fork.metadata.compression_history if e.checkpoint
    ] == [2]
    assert fork.metadata.compression_count == 1
    whole = store.get_session(store.fork_session(sid).session_id)
    assert len(whole.metadata.compression_history) == 2


def test_fork_of_a_session_another_store_holds_sees_its_journaled_records(
    sessions_dir: Path, snapshots_dir: Path
) -> None:
    writer = ChatRecordingService(make_settings(sessions_dir), snapshots_dir=snapshots_dir)
    reader = ChatRecordingService(make_settings(sessions_dir), snapshots_dir=snapshots_dir)
    try:
        sid = writer.create_session("m", "simulated")
        writer.record_message(sid, SessionMessage.user("hello"))  # journaled, file not saved
        result = reader.fork_session(sid)
        assert [m.text for m in reader.get_session(result.session_id).messages] == ["hello"]
        writer.record_message(sid, SessionMessage.user("still writing"))  # the writer goes on
        assert len(writer.get_session(sid).messages) == 2
    finally:
        writer.close()
        reader.close()


def test_bad_input_says_what_is_wrong_and_creates_nothing(store: ChatRecordingService) -> None:
    sid = _session(store)
    with pytest.raises(SessionError, match=r"message 9 is beyond session .* it has 8"):
        store.fork_session(sid, at=9)
    with pytest.raises(SessionError, match="beyond"):
        store.fork_session(sid, at=-1)
    with pytest.raises(SessionNotFoundError):
        store.fork_session("0123abcd-0000-4000-8000-000000000000")
    with pytest.raises(SessionError, match="plain"):
        store.fork_session(sid, title="\x1b[31mred")
    assert store.count_sessions() == 1


_texts = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(_texts, min_size=0, max_size=8), cut=st.integers(0, 8))
def test_property_fork_then_export_equals_the_prefix(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], cut: int
) -> None:
    folder = tmp_path_factory.mktemp("fork")
    store = ChatRecordingService(make_settings(folder / "s"), snapshots_dir=folder / "snap")
    try:
        sid = store.create_session("m", "simulated")
        for i, text in enumerate(texts):
            store.record_message(
                sid, SessionMessage.user(text) if i % 2 == 0 else SessionMessage.assistant(text)
            )
        at = min(cut, len(texts))
        fork_id = store.fork_session(sid, at=at).session_id
        exported = Session.from_json((folder / "s" / f"{fork_id}.json").read_bytes())
        assert exported.messages == store.get_session(sid).messages[:at]
        assert exported.session_id == fork_id
    finally:
        store.close()
