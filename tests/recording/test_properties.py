"""Properties 1 to 9 of spec 001 (session recording), 100 examples each.

Each example works in a fresh temporary folder with a real store: real files,
real fsyncs, the real SQLite index. The folders are on a tmpfs where there is
one (``/dev/shm``), where an fsync costs nothing, to keep 900 examples fast;
durability on a real disk is what ``test_crash.py`` checks.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session, SessionMessage, SessionToolCall, parse_iso
from tests.recording.conftest import FAST_TMP, make_settings
from tests.recording.strategies import MODELS, PROVIDERS, messages, records, tool_calls

REQUIRED_SESSION_FIELDS = {
    "sessionId",
    "startTime",
    "lastActivity",
    "model",
    "provider",
    "messages",
    "toolCalls",
    "metadata",
}


@contextmanager
def fresh_store(**overrides: object) -> Iterator[ChatRecordingService]:
    """A store on a folder of its own, for one hypothesis example."""
    with tempfile.TemporaryDirectory(prefix="ollm-prop-", dir=FAST_TMP) as folder:
        store = ChatRecordingService(
            make_settings(Path(folder) / "sessions", **overrides),
            snapshots_dir=Path(folder) / "snapshots",
        )
        try:
            yield store
        finally:
            store.close()


def record_all(
    store: ChatRecordingService, sid: str, items: list[SessionMessage | SessionToolCall]
) -> None:
    for item in items:
        if isinstance(item, SessionMessage):
            store.record_message(sid, item)
        else:
            store.record_tool_call(sid, item)


def split(items: list[SessionMessage | SessionToolCall]) -> tuple[list[dict], list[dict]]:
    messages = [i.to_dict() for i in items if isinstance(i, SessionMessage)]
    calls = [i.to_dict() for i in items if isinstance(i, SessionToolCall)]
    return messages, calls


def every_timestamp(data: dict) -> Iterator[str]:
    yield data["startTime"]
    yield data["lastActivity"]
    for message in data["messages"]:
        yield message["timestamp"]
    for call in data["toolCalls"]:
        yield call["timestamp"]
    for event in data["metadata"].get("compressionHistory", []):
        yield event["timestamp"]


@given(items=records, model=st.sampled_from(MODELS), provider=st.sampled_from(PROVIDERS))
def test_property_1_session_persistence_round_trip(
    items: list[SessionMessage | SessionToolCall], model: str, provider: str
) -> None:
    with fresh_store() as store:
        sid = store.create_session(model, provider)
        record_all(store, sid, items)
        store.save_session(sid)
        store.close_session(sid)
        with ChatRecordingService(store.settings) as other:
            loaded = other.open_session(sid)
        messages, calls = split(items)
        assert [m.to_dict() for m in loaded.messages] == messages
        assert [c.to_dict() for c in loaded.tool_calls] == calls
        assert (loaded.model, loaded.provider, loaded.session_id) == (model, provider, sid)
        # and the models built from the file equal a full pydantic validation of it
        raw = (store.data_dir / f"{sid}.json").read_bytes()
        validated = Session.model_validate({**orjson.loads(raw), "revision": None})
        assert loaded.messages == validated.messages
        assert loaded.tool_calls == validated.tool_calls


@given(items=records)
def test_property_2_session_file_format_completeness(
    items: list[SessionMessage | SessionToolCall],
) -> None:
    with fresh_store() as store:
        sid = store.create_session("llama3.1:8b", "ollama")
        record_all(store, sid, items)
        store.save_session(sid)
        data = orjson.loads((store.data_dir / f"{sid}.json").read_bytes())
        assert data.keys() >= REQUIRED_SESSION_FIELDS
        assert {"tokenCount", "compressionCount"} <= data["metadata"].keys()
        for message in data["messages"]:
            assert {"role", "parts", "timestamp"} <= message.keys()
            assert all("type" in part for part in message["parts"])
        for call in data["toolCalls"]:
            assert {"id", "name", "args", "result", "timestamp"} <= call.keys()
            assert "llmContent" in call["result"]
        messages, calls = split(items)
        assert (len(data["messages"]), len(data["toolCalls"])) == (len(messages), len(calls))


@given(items=records, compressions=st.integers(0, 2))
def test_property_3_timestamp_format_validity(
    items: list[SessionMessage | SessionToolCall], compressions: int
) -> None:
    from ollm_cli.pipeline.records import CompressionEvent

    with fresh_store() as store:
        sid = store.create_session("llama3.1:8b", "ollama")
        record_all(store, sid, items)
        for _ in range(compressions):
            store.record_compression(
                sid, CompressionEvent(strategy="hybrid", tokens_before=100, tokens_after=40)
            )
        store.save_session(sid)
        data = orjson.loads((store.data_dir / f"{sid}.json").read_bytes())
        stamps = list(every_timestamp(data))
        assert len(stamps) == 2 + len(items) + compressions
        for stamp in stamps:
            assert isinstance(parse_iso(stamp), datetime)


@given(count=st.integers(1, 8), given_ids=st.lists(st.uuids(version=4), max_size=3))
def test_property_4_session_id_uniqueness_and_format(
    count: int, given_ids: list[uuid.UUID]
) -> None:
    with fresh_store() as store:
        ids = [store.create_session("m", "p") for _ in range(count)]
        wanted = list(dict.fromkeys(str(u).upper() for u in given_ids))
        ids += [store.create_session("m", "p", session_id=u) for u in wanted]
        assert len(set(ids)) == len(ids)
        for sid in ids:
            assert str(uuid.UUID(sid)) == sid  # canonical lowercase UUID
            assert (store.data_dir / f"{sid}.json").is_file()
        assert [s.lower() for s in wanted] == ids[count:]
        assert {s.session_id for s in store.list_sessions()} == set(ids)


@given(
    shapes=st.lists(
        st.tuples(
            st.lists(st.one_of(messages, tool_calls), max_size=4),
            st.sampled_from(MODELS),
            st.integers(0, 10_000),
        ),
        max_size=4,
    )
)
def test_property_5_session_listing_completeness(
    shapes: list[tuple[list[SessionMessage | SessionToolCall], str, int]],
) -> None:
    with fresh_store() as store:
        expected = {}
        for items, model, tokens in shapes:
            sid = store.create_session(model, "ollama")
            record_all(store, sid, items)
            store.set_token_count(sid, tokens)
            messages, calls = split(items)
            expected[sid] = (model, len(messages), len(calls), tokens)
            if tokens % 2:  # some saved and closed, some still open with journaled records
                store.close_session(sid)
            else:
                store.save_session(sid)
        with ChatRecordingService(store.settings) as reader:
            listed = {
                s.session_id: (s.model, s.message_count, s.tool_call_count, s.token_count)
                for s in reader.list_sessions()
            }
            assert listed == expected
            assert reader.count_sessions() == len(expected)


@given(
    count=st.integers(1, 5),
    victim=st.integers(0, 4),
    open_victim=st.booleans(),
    words=st.text(max_size=40),
)
def test_property_6_session_deletion_removes_file(
    count: int, victim: int, open_victim: bool, words: str
) -> None:
    with fresh_store() as store:
        ids = [store.create_session("m", "p") for _ in range(count)]
        for sid in ids:
            store.record_message(sid, SessionMessage.user(f"hello from {sid}: {words}"))
            store.save_session(sid)
        gone = ids[victim % count]
        if not open_victim:
            store.close_session(gone)
        (store.snapshots_dir / gone / "snapshots").mkdir(parents=True)
        store.delete_session(gone)
        assert not (store.data_dir / f"{gone}.json").exists()
        assert not (store.snapshots_dir / gone).exists()
        listed = {s.session_id for s in store.list_sessions()}
        assert listed == set(ids) - {gone}
        assert {h.session_id for h in store.search("hello")} == set(ids) - {gone}
        for sid in set(ids) - {gone}:
            assert len(store.get_session(sid).messages) == 1


@given(items=records, saved_after=st.integers(0, 12))
def test_property_7_session_auto_save_durability(
    items: list[SessionMessage | SessionToolCall], saved_after: int
) -> None:
    """Whatever is on disk when the process stops (here: a copy taken while the store
    is still running, files and journal as they are) holds every acknowledged record."""
    with fresh_store() as store, tempfile.TemporaryDirectory(dir=FAST_TMP) as crash:
        sid = store.create_session("m", "p")
        for n, item in enumerate(items):
            record_all(store, sid, [item])
            if n == saved_after:
                store.save_session(sid)  # a turn end part way
        copy = Path(crash) / "sessions"
        shutil.copytree(store.data_dir, copy, ignore=shutil.ignore_patterns(".locks"))
        with ChatRecordingService(make_settings(copy)) as after_crash:
            recovered = after_crash.open_session(sid)
        messages, calls = split(items)
        assert [m.to_dict() for m in recovered.messages] == messages
        assert [c.to_dict() for c in recovered.tool_calls] == calls


@given(
    keep=st.integers(1, 4),
    created=st.integers(0, 9),
    pinned=st.sets(st.integers(0, 9), max_size=3),
)
def test_property_8_session_count_limit_enforcement(
    keep: int, created: int, pinned: set[int]
) -> None:
    with fresh_store(max_sessions=keep) as store:
        ids: list[str] = []
        for n in range(created):
            sid = store.create_session("m", "p")
            ids.append(sid)
            if n in pinned:
                store.set_pinned(sid, True)
            store.record_message(sid, SessionMessage.user(f"message {n}"))  # newer activity
            store.close_session(sid)
        remaining = {s.session_id for s in store.list_sessions()}
        if not created:
            assert remaining == set()
            return
        # the last cleanup ran when the newest session was created (and open, so kept)
        earlier = ids[:-1]
        pinned_earlier = {ids[n] for n in pinned if n < created - 1}
        unpinned = [sid for sid in earlier if sid not in pinned_earlier]
        room = max(0, keep - len(pinned_earlier) - 1)
        newest_unpinned = set(unpinned[-room:]) if room else set()
        assert remaining == pinned_earlier | {ids[-1]} | newest_unpinned
        assert len(remaining) <= max(keep, len(pinned_earlier) + 1)
        if not pinned_earlier:
            assert len(remaining) == min(created, keep)


@given(items=records)
def test_property_9_last_activity_timestamp_updates(
    items: list[SessionMessage | SessionToolCall],
) -> None:
    with fresh_store() as store:
        sid = store.create_session("m", "p")
        session = store.get_session(sid)
        previous = parse_iso(session.last_activity)
        assert previous >= parse_iso(session.start_time)
        for item in items:  # items carry arbitrary (often old or future) timestamps
            record_all(store, sid, [item])
            current = parse_iso(store.get_session(sid).last_activity)
            assert current >= previous
            previous = current
        store.close_session(sid)
        assert parse_iso(store.get_session(sid).last_activity) == previous
