"""The session document: its file format, and models built without pydantic's loop."""

from __future__ import annotations

import uuid

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.recording._document import DocumentError, SessionDocument, gc_paused
from ollm_cli.pipeline.records import Session, SessionMessage, SessionToolCall, now_iso
from tests.recording.strategies import messages, tool_calls


def _data(**fields: object) -> dict[str, object]:
    now = now_iso()
    data: dict[str, object] = {
        "sessionId": str(uuid.uuid4()),
        "startTime": now,
        "lastActivity": now,
        "model": "m",
        "provider": "p",
        "messages": [],
        "toolCalls": [],
        "metadata": {},
    }
    data.update(fields)
    return data


@given(items=st.lists(messages, max_size=6), calls=st.lists(tool_calls, max_size=4))
def test_models_built_directly_equal_pydantic_validation(
    items: list[SessionMessage], calls: list[SessionToolCall]
) -> None:
    data = _data(messages=[m.to_dict() for m in items], toolCalls=[c.to_dict() for c in calls])
    raw = orjson.dumps(data)
    built = SessionDocument.decode(raw).to_session()
    validated = Session.model_validate(orjson.loads(raw))
    assert built == validated
    assert built.to_dict() == validated.to_dict()
    assert [m.text for m in built.messages] == [m.text for m in validated.messages]


@pytest.mark.parametrize(
    "odd",
    [
        {
            "role": "user",
            "parts": [{"type": "text", "text": "hi", "lang": "en"}],
            "timestamp": "2024-01-01T00:00:00Z",
        },
        {
            "role": "user",
            "parts": [{"type": "image", "path": "a.png"}],
            "timestamp": "2024-01-01T00:00:00Z",
        },
        {"role": "user", "parts": [{"type": "video", "url": "x"}], "timestamp": "2024-01-01"},
        {"role": "user", "parts": [], "timestamp": "2024-01-01T00:00:00+02:00", "extra": 1},
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_result",
                    "toolCallId": "a",
                    "name": "n",
                    "content": "c",
                    "isError": 1,
                }
            ],
            "timestamp": "2024-01-01T00:00:00Z",
        },
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "a", "name": "n", "args": [], "more": 1}],
            "timestamp": "2024-01-01T00:00:00Z",
        },
    ],
)
def test_unusual_messages_go_through_full_validation(odd: dict) -> None:
    data = _data(messages=[odd])
    try:
        expected: object = Session.model_validate(orjson.loads(orjson.dumps(data)))
    except Exception as exc:  # the same failure either way
        expected = type(exc)
    doc = SessionDocument.decode(orjson.dumps(data))
    try:
        built: object = doc.to_session()
    except Exception as exc:
        built = type(exc)
    assert built == expected


def test_unusual_tool_calls_and_ids_go_through_full_validation() -> None:
    call = {
        "id": "c",
        "name": "n",
        "args": {},
        "result": {"llmContent": "x"},
        "timestamp": "2024-01-01T00:00:00Z",
        "durationMs": True,
    }
    data = _data(toolCalls=[call], sessionId="{" + str(uuid.uuid4()) + "}")
    built = SessionDocument.decode(orjson.dumps(data)).to_session()
    assert built == Session.model_validate(data)
    assert built.tool_calls[0].duration_ms == 1.0
    int_duration = dict(call, durationMs=5)
    built = SessionDocument.decode(orjson.dumps(_data(toolCalls=[int_duration]))).to_session()
    assert built.tool_calls[0].duration_ms == 5.0 and isinstance(
        built.tool_calls[0].duration_ms, float
    )


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"[1, 2]", "holds an object"),
        (b"{nope", "not valid JSON"),
        (orjson.dumps(_data(model=3)), "'model'"),
        (orjson.dumps(_data(startTime="yesterday")), "ISO 8601"),
        (orjson.dumps(_data(messages={"a": 1})), "'messages'"),
        (orjson.dumps(_data(toolCalls=[1])), "'toolCalls'"),
        (orjson.dumps(_data(metadata={"tokenCount": "many"})), "metadata"),
    ],
    # ids by what is wrong: the raw bytes hold a fresh id and time, and every pytest-xdist
    # worker must collect the same names
    ids=["array", "not-json", "model", "start-time", "messages", "tool-calls", "metadata"],
)
def test_files_that_are_not_sessions_say_why(raw: bytes, problem: str) -> None:
    with pytest.raises(DocumentError, match=problem):
        SessionDocument.decode(raw)


def test_a_file_must_hold_the_session_of_its_name() -> None:
    data = _data()
    with pytest.raises(DocumentError, match="not the"):
        SessionDocument.decode(orjson.dumps(data), str(uuid.uuid4()))


def test_revision_is_written_and_read_back_but_never_shown() -> None:
    doc = SessionDocument.from_data(_data(revision={"epoch": 12, "seq": 3}))
    assert (doc.epoch, doc.seq) == (12, 3)
    again = SessionDocument.decode(doc.encode())
    assert (again.epoch, again.seq) == (12, 3)
    assert "revision" not in doc.data and "revision" not in (doc.to_session().model_extra or {})
    fresh = SessionDocument.from_data(_data(revision="bogus"))
    assert fresh.seq == 0


def test_missing_lists_default_to_empty() -> None:
    data = _data()
    del data["messages"], data["toolCalls"], data["metadata"]
    session = SessionDocument.from_data(data).to_session()
    assert session.messages == [] and session.tool_calls == []


def test_apply_changes_header_fields_too() -> None:
    doc = SessionDocument.from_data(_data())
    doc.apply({"hd": {"model": "other"}, "md": {"title": "t"}})
    assert doc.to_session().model == "other" and doc.metadata["title"] == "t"


def test_gc_pauses_nest_and_restore_the_collector() -> None:
    import gc

    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
