"""A session file read as a stream (passes 1 and 2 of ``open_streamed``) says what
the whole file says: its outline, its recorded tool calls and what a crash left."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.recording._document import PARTIAL_KEY, REVISION_KEY
from ollm_cli.pipeline.recording._stream import open_streamed
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)

SID = "0b7d3c52-8a47-4f5e-9a43-1c9f2c8e6d10"


def _call(call_id: str, content: str) -> SessionToolCall:
    return SessionToolCall(id=call_id, name="read_file", result=ToolResult(llm_content=content))


def _file(tmp_path: Path) -> tuple[Path, Session]:
    session = Session(
        session_id=SID,
        start_time="2025-01-01T00:00:00.000Z",
        last_activity="2025-01-01T00:01:00.000Z",
        model="llama3.2",
        provider="ollama",
        messages=[
            SessionMessage.user("read it"),
            SessionMessage(role="assistant", parts=[ToolCallPart(id="held", name="read_file")]),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="held", name="read_file", content="x" * 50)],
            ),
            SessionMessage(role="assistant", parts=[TextPart(text="done")]),
        ],
        tool_calls=[
            _call("held", "x" * 50),  # its result is in a message: not kept twice
            _call("held", "a second record of the same call"),
            _call("lonely", "no message mentions this call"),
        ],
    )
    data = session.to_dict()
    data[REVISION_KEY] = {"epoch": 3, "seq": 41}
    data[PARTIAL_KEY] = SessionMessage(
        role="assistant", parts=[TextPart(text="half an ans")]
    ).to_dict()
    path = tmp_path / f"{SID}.json"
    path.write_bytes(orjson.dumps(data))
    return path, session


def test_the_outline_of_a_streamed_session(tmp_path: Path) -> None:
    path, session = _file(tmp_path)
    streamed = open_streamed(path)
    assert streamed.header.session_id == SID
    assert (streamed.header.model, streamed.header.provider) == ("llama3.2", "ollama")
    assert streamed.header.messages == [] and streamed.header.tool_calls == []
    assert streamed.revision == (3, 41)
    assert streamed.message_count == 5  # four messages and the part a crash left
    assert streamed.tool_call_count == 3
    assert streamed.called_ids == {"held"} and streamed.result_ids == {"held"}
    assert sorted(streamed.recorded) == ["held", "lonely"]
    assert streamed.recorded["held"].result.llm_content == ""
    assert [c.id for c in streamed.orphans] == ["lonely"]
    assert streamed.orphans[0].result.llm_content == "no message mentions this call"
    messages = list(streamed.messages())
    assert messages[:-1] == session.messages
    assert messages[-1].text == "half an ans"


def test_a_file_that_is_not_a_session_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_bytes(b'{"sessionId": "x", "messages": [')
    with pytest.raises(ValueError):
        open_streamed(path)


def test_a_torn_large_file_is_read_whole_where_its_damage_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store streams a file only when it reads as a session; a file cut short
    by a crash is left to ``get_session`` (which reports it) rather than raising
    ijson's own error out of ``ollm sessions view``."""
    from ollm_cli.config.settings import SessionSettings
    from ollm_cli.pipeline.recording import ChatRecordingService
    from ollm_cli.pipeline.recording import _stream as session_stream

    folder = tmp_path / "sessions"
    folder.mkdir()
    path, _ = _file(folder)
    monkeypatch.setattr(session_stream, "STREAM_BYTES", 0)  # stream every file
    with ChatRecordingService(SessionSettings(data_dir=folder, max_sessions=0)) as store:
        assert store.streamed(SID) is not None
        path.write_bytes(path.read_bytes()[:-40])
        assert store.streamed(SID) is None
