"""The ChatRecordingService API: lifecycle, metadata, listing, search, deletion, import."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.errors import (
    AmbiguousSessionIdError,
    SessionError,
    SessionNotFoundError,
)
from ollm_cli.pipeline.recording import MARK_END, MARK_START, ChatRecordingService
from ollm_cli.pipeline.recording._delayed_saves import DelayedSaves
from ollm_cli.pipeline.records import (
    CompressionEvent,
    Session,
    SessionMessage,
    SessionToolCall,
    ToolCallPart,
    ToolResult,
    now_iso,
)
from tests.recording.conftest import make_settings


def _file(store: ChatRecordingService, sid: str) -> dict:
    return orjson.loads((store.data_dir / f"{sid}.json").read_bytes())


def test_chat_recording_service_is_the_spec_name_of_the_store() -> None:
    assert ChatRecordingService.__name__ == "ChatRecordingService"


def test_a_reader_of_a_home_without_sessions_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = ChatRecordingService(make_settings(home / "sessions"), read_only=True)
    assert store.list_sessions() == [] and store.count_sessions() == 0
    store.close()
    assert not home.exists()


def test_every_folder_the_store_creates_is_private(tmp_path: Path) -> None:
    # mkdir(parents=True, mode=0o700) gives the mode to the last folder only
    deep = tmp_path / "a" / "b" / "sessions"
    store = ChatRecordingService(make_settings(deep))
    store.create_session("m", "p")
    store.close()
    for folder in (tmp_path / "a", tmp_path / "a" / "b", deep, *deep.iterdir()):
        if folder.is_dir():
            assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder


def test_create_writes_a_private_file_at_once_and_holds_the_writer_lock(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = store.create_session("llama3.2:3b", "ollama", working_dir="/w", tags=["a", " a ", "b"])
    data = _file(store, sid)
    assert (data["model"], data["provider"], data["messages"], data["toolCalls"]) == (
        "llama3.2:3b",
        "ollama",
        [],
        [],
    )
    assert data["metadata"]["workingDir"] == "/w" and data["metadata"]["tags"] == ["a", "b"]
    assert data["startTime"] == data["lastActivity"]
    assert stat.S_IMODE(os.stat(sessions_dir / f"{sid}.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sessions_dir).st_mode) == 0o700
    assert (sessions_dir / ".locks" / f"{sid}.lock").read_text().strip() == str(os.getpid())
    assert store.is_open(sid) and store.open_sessions == [sid]
    with pytest.raises(SessionError, match="already exists"):
        store.create_session("m", "p", session_id=sid)
    store.close_session(sid)
    assert not (sessions_dir / ".locks" / f"{sid}.lock").exists()
    store.close_session(sid)  # closing twice is fine


def test_records_are_journaled_at_once_and_saved_to_the_file_at_turn_end(
    store: ChatRecordingService,
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("hello"))
    call = SessionToolCall(
        id="c1", name="read_file", args={"path": "a.py"}, result=ToolResult(llm_content="x")
    )
    store.record_tool_call(sid, call)
    assert _file(store, sid)["messages"] == []  # not rewritten per record
    assert [m.text for m in store.get_session(sid).messages] == ["hello"]
    store.save_session(sid)
    data = _file(store, sid)
    assert [m["parts"][0]["text"] for m in data["messages"]] == ["hello"]
    assert data["toolCalls"] == [call.to_dict()]
    assert data["revision"]["seq"] == 2
    assert "revision" not in (store.get_session(sid).model_extra or {})


def test_turn_ends_in_quick_succession_share_one_rewrite(
    store: ChatRecordingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = store.create_session("m", "p")
    writes: list[str] = []
    original = store._save

    def counted(state: object) -> bool:
        writes.append(sid)
        return original(state)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_save", counted)
    now = [100.0]  # the delayed saves run on this clock, when the test says (run_due)
    saves = DelayedSaves(store._save_if_open, clock=lambda: now[0], background=False)
    monkeypatch.setattr(store, "_delayed", saves)
    for n in range(5):
        store.record_message(sid, SessionMessage.user(f"turn {n}"))
        store.save_session_soon(sid, 0.3)
    now[0] = 100.25
    assert saves.run_due() == []
    assert _file(store, sid)["messages"] == []  # not yet: more turns may follow
    assert store.save_pending(sid)
    assert len(store.get_session(sid).messages) == 5  # readers see the journal
    now[0] = 100.5
    assert saves.run_due() == [sid]
    assert [m["parts"][0]["text"] for m in _file(store, sid)["messages"]][-1] == "turn 4"
    assert writes == [sid]  # five turn ends, one rewrite
    store.record_message(sid, SessionMessage.user("one more"))
    store.save_session_soon(sid, 0)  # no delay: due at once
    assert saves.run_due() == [sid]
    assert writes == [sid, sid]
    assert [m["parts"][0]["text"] for m in _file(store, sid)["messages"]][-1] == "one more"


def test_a_waiting_save_is_done_by_close(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("last words"))
    store.save_session_soon(sid, 60)
    store.close_session(sid)
    assert [m["parts"][0]["text"] for m in _file(store, sid)["messages"]] == ["last words"]
    other = store.create_session("m", "p")
    store.record_message(other, SessionMessage.user("at exit"))
    store.save_session_soon(other, 60)
    store.close()
    assert [m["parts"][0]["text"] for m in _file(store, other)["messages"]] == ["at exit"]


def test_usage_token_count_and_compressions_are_kept_in_metadata(
    store: ChatRecordingService,
) -> None:
    sid = store.create_session("m", "p")
    store.add_usage(sid, prompt_tokens=100, completion_tokens=20)
    store.add_usage(sid, prompt_tokens=50, completion_tokens=5)
    meta = store.get_session(sid).metadata
    assert (meta.prompt_tokens, meta.completion_tokens, meta.token_count) == (150, 25, 175)
    store.set_token_count(sid, 90)  # set otherwise: usage no longer drives it
    store.add_usage(sid, prompt_tokens=1, completion_tokens=1)
    meta = store.get_session(sid).metadata
    assert (meta.prompt_tokens, meta.completion_tokens, meta.token_count) == (151, 26, 90)
    event = CompressionEvent(strategy="hybrid", tokens_before=900, tokens_after=300)
    store.record_compression(sid, event)
    store.record_compression(sid, event)
    store.close_session(sid)
    meta = store.get_session(sid).metadata
    assert meta.compression_count == 2 and meta.compression_history == [event, event]
    with pytest.raises(SessionError, match="negative"):
        store.add_usage(sid, prompt_tokens=-1, completion_tokens=0)
    with pytest.raises(SessionError, match="negative"):
        store.set_token_count(sid, -5)


def test_the_title_comes_from_the_first_user_message_until_set_by_hand(
    store: ChatRecordingService,
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.system("You are helpful."))
    store.record_message(sid, SessionMessage.user("\n   \n"))
    assert store.get_session(sid).metadata.title is None
    long = "Please   help me fix " + "the flaky login form " * 8 + "\nsecond line"
    store.record_message(sid, SessionMessage.user(long))
    meta = store.get_session(sid).metadata
    assert meta.title_source == "auto" and meta.title is not None
    assert meta.title.startswith("Please help me fix the flaky") and meta.title.endswith("…")
    assert len(meta.title) <= 80 and "\n" not in meta.title
    store.record_message(sid, SessionMessage.user("a later message does not retitle"))
    assert store.get_session(sid).metadata.title == meta.title
    store.set_title(sid, "  My\n title ")
    store.close_session(sid)
    meta = store.get_session(sid).metadata
    assert (meta.title, meta.title_source) == ("My title", "manual")
    assert store.list_sessions()[0].title == "My title"
    with pytest.raises(SessionError, match="empty"):
        store.set_title(sid, "   ")
    manual = store.create_session("m", "p", title="Given")
    store.record_message(manual, SessionMessage.user("not the title"))
    assert store.get_session(manual).metadata.title == "Given"


def test_metadata_of_open_and_closed_sessions(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    store.update_metadata(sid, title="by the model", title_source="model", custom={"k": 1})
    store.add_tags(sid, ["work", "docker", "work"])
    store.set_notes(sid, "remember this")
    store.set_pinned(sid, True)
    store.close_session(sid)
    assert _file(store, sid)["metadata"]["custom"] == {"k": 1}
    store.remove_tags(sid, ["docker", "absent"])  # closed: rewritten under a brief lock
    store.update_metadata(sid, notes=None)
    meta = store.get_session(sid).metadata
    assert (meta.title, meta.title_source, meta.tags, meta.pinned, meta.notes) == (
        "by the model",
        "model",
        ["work"],
        True,
        None,
    )
    assert not store.is_open(sid)
    assert _file(store, sid)["metadata"]["tags"] == ["work"]
    with pytest.raises(SessionError, match="unknown session metadata field"):
        store.update_metadata(sid, colour="blue")
    with pytest.raises(SessionError, match="invalid session metadata"):
        store.update_metadata(sid, pinned="maybe")
    with pytest.raises(SessionError, match="invalid session metadata"):
        store.update_metadata(store.create_session("m", "p"), tags=7)


def test_resume_returns_everything_and_keeps_recording(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    message = SessionMessage(
        role="assistant", parts=[ToolCallPart(id="t1", name="shell", args={"cmd": "ls"})]
    )
    store.record_message(sid, message)
    store.close()
    with ChatRecordingService(store.settings) as again:
        resumed = again.open_session(sid[:8])
        assert resumed.messages == [message]
        assert again.open_session(sid) == resumed  # already open: the same content
        again.record_message(sid, SessionMessage.user("more"))
    with ChatRecordingService(store.settings) as third:
        assert [m.text for m in third.get_session(sid).messages] == ["", "more"]


def test_recording_into_a_closed_session_opens_it_again(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    store.close_session(sid)
    store.record_message(sid, SessionMessage.user("reopened"))
    assert store.is_open(sid)
    assert [m.text for m in store.get_session(sid).messages] == ["reopened"]


def test_a_closed_store_refuses_new_work(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    store.close()
    store.close()
    with pytest.raises(SessionError, match="closed"):
        store.create_session("m", "p")
    with pytest.raises(SessionError, match="closed"):
        store.record_message(sid, SessionMessage.user("late"))
    assert store.get_session(sid).session_id == sid  # reading still works


def _aged(store: ChatRecordingService, count: int) -> list[str]:
    """Sessions with distinct, increasing activity, closed."""
    ids = []
    for n in range(count):
        sid = store.create_session(
            ["llama", "mistral"][n % 2], "ollama", tags=["even" if n % 2 == 0 else "odd"]
        )
        for i in range(n + 1):
            store.record_message(sid, SessionMessage.user(f"session {n} message {i}"))
        store.add_usage(sid, prompt_tokens=10 * n, completion_tokens=1)
        store.close_session(sid)
        ids.append(sid)
    return ids


def test_listing_filters_sorts_and_pages(store: ChatRecordingService) -> None:
    ids = _aged(store, 6)
    store.set_title(ids[2], "Docker_50% cache")
    listed = store.list_sessions()
    assert [s.session_id for s in listed] == ids[::-1]  # most recent first
    assert [s.message_count for s in listed] == [6, 5, 4, 3, 2, 1]
    assert [s.session_id for s in store.list_sessions(descending=False)] == ids
    assert [s.session_id for s in store.list_sessions(limit=2, offset=1)] == [ids[4], ids[3]]
    by_count = store.list_sessions(sort="messageCount", descending=False, limit=3)
    assert [s.message_count for s in by_count] == [1, 2, 3]
    tokens = [s.token_count for s in store.list_sessions(sort="tokenCount")]
    assert tokens == sorted(tokens, reverse=True)
    assert {s.session_id for s in store.list_sessions(tag="even")} == set(ids[0::2])
    assert {s.session_id for s in store.list_sessions(model="mistral")} == set(ids[1::2])
    assert [s.session_id for s in store.list_sessions(title="docker_50%")] == [ids[2]]
    assert store.list_sessions(title="dock_r") == []  # LIKE wildcards are taken literally
    for column in ("sessionId", "title", "startTime", "model", "provider", "toolCallCount"):
        assert len(store.list_sessions(sort=column)) == 6
    with pytest.raises(SessionError, match="cannot sort"):
        store.list_sessions(sort="colour")
    with pytest.raises(SessionError, match="negative"):
        store.list_sessions(limit=-1)
    now = datetime.now(UTC)
    assert len(store.list_sessions(since=now - timedelta(hours=1))) == 6
    assert store.list_sessions(until=now - timedelta(hours=1)) == []
    naive_future = datetime.now() + timedelta(days=2)  # naive means UTC
    assert store.list_sessions(since=naive_future) == []
    assert store.count_sessions() == 6


def test_listing_sees_files_changed_by_other_processes(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    ids = _aged(store, 2)
    assert store.count_sessions() == 2
    # another program rewrites a file in place (same folder mtime, new file content)
    path = sessions_dir / f"{ids[0]}.json"
    data = orjson.loads(path.read_bytes())
    data["model"] = "edited"
    path.write_bytes(orjson.dumps(data))
    store.reindex()
    assert {s.model for s in store.list_sessions()} == {"edited", "mistral"}
    # a file copied in and one removed behind the store's back
    copy = dict(data, sessionId="00000000-0000-4000-8000-00000000abcd")
    (sessions_dir / "00000000-0000-4000-8000-00000000abcd.json").write_bytes(orjson.dumps(copy))
    (sessions_dir / f"{ids[1]}.json").unlink()
    listed = {s.session_id for s in store.list_sessions()}
    assert listed == {ids[0], "00000000-0000-4000-8000-00000000abcd"}
    (sessions_dir / "notes.txt").write_text("not a session")
    assert store.count_sessions() == 2


def test_search_finds_messages_and_tool_calls_with_highlighted_snippets(
    store: ChatRecordingService,
) -> None:
    first = store.create_session("m", "p")
    store.record_message(first, SessionMessage.user("How do I speed up the Docker build cache?"))
    store.record_tool_call(
        first,
        SessionToolCall(
            id="c",
            name="grep",
            args={"pattern": "kubernetes"},
            result=ToolResult(llm_content="deployment.yaml: kind: Deployment"),
        ),
    )
    store.save_session(first)
    second = store.create_session("m", "p", title="Notes about docker")
    store.set_notes(second, "nothing else")
    store.save_session(second)
    hits = store.search("docker")
    assert {h.session_id for h in hits} == {first, second}
    by_id = {h.session_id: h for h in hits}
    assert by_id[first].where == "message" and by_id[first].role == "user"
    assert f"{MARK_START}Docker{MARK_END}" in by_id[first].snippet
    assert by_id[second].where == "metadata"
    tool = store.search("kubernetes")
    assert [(h.session_id, h.where, h.index) for h in tool] == [(first, "toolCall", 0)]
    assert store.search("deploy*")[0].session_id == first
    assert store.search("docker build")[0].session_id == first  # every word must match
    assert store.search("docker", limit=1)[0].score >= store.search("docker")[-1].score
    assert store.search("docker", limit=0) == []
    assert store.search("absentword") == []


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "docker AND", "OR", "NOT docker", "col:docker", "docker)", "a*b", "^x"],
)
def test_search_takes_fts_syntax_literally(store: ChatRecordingService, query: str) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("docker and kubernetes"))
    store.save_session(sid)
    hits = store.search(query)  # never an SQLite syntax error
    assert all(h.session_id == sid for h in hits)


def test_an_empty_search_is_a_clear_error(store: ChatRecordingService) -> None:
    for query in ("", "   ", "* ? !", "(", '"'):
        with pytest.raises(SessionError, match="no words"):
            store.search(query)


def test_ids_resolve_from_a_unique_prefix_as_git_does(store: ChatRecordingService) -> None:
    ids = ["abcd1234-0000-4000-8000-000000000001", "abcd5678-0000-4000-8000-000000000002"]
    for sid in ids:
        store.create_session("m", "p", session_id=sid)
    assert store.resolve_id("abcd1") == ids[0]
    assert store.resolve_id("ABCD5678") == ids[1]
    assert store.resolve_id("abcd12340000") == ids[0]  # dashes may be left out
    assert store.resolve_id(ids[1].upper()) == ids[1]
    with pytest.raises(AmbiguousSessionIdError, match="matches 2 sessions") as raised:
        store.resolve_id("abcd")
    assert ids[0] in str(raised.value) and "more characters" in (raised.value.hint or "")
    with pytest.raises(SessionNotFoundError, match="starts with"):
        store.resolve_id("ffff")
    assert store.get_session("abcd5").session_id == ids[1]


def test_ambiguous_message_lists_a_few_ids(store: ChatRecordingService) -> None:
    for n in range(7):
        store.create_session("m", "p", session_id=f"aaaa{n:04d}-0000-4000-8000-000000000000")
    with pytest.raises(AmbiguousSessionIdError, match=r"matches 7 sessions: .*, \.\.\."):
        store.resolve_id("aaaa")


def test_delete_removes_file_journal_index_row_and_snapshots(
    store: ChatRecordingService, sessions_dir: Path, snapshots_dir: Path
) -> None:
    keep, gone = _aged(store, 2)
    (snapshots_dir / gone / "snapshots").mkdir(parents=True)
    (snapshots_dir / gone / "snapshots" / "snapshot-1.json").write_text("{}")
    store.delete_session(gone[:6])
    assert not (sessions_dir / f"{gone}.json").exists()
    assert not (snapshots_dir / gone).exists()
    assert [s.session_id for s in store.list_sessions()] == [keep]
    assert store.search("session") and all(h.session_id == keep for h in store.search("session"))
    with pytest.raises(SessionNotFoundError):
        store.delete_session(gone)


def test_delete_oldest_keeps_the_newest_pinned_and_open_ones(store: ChatRecordingService) -> None:
    ids = _aged(store, 6)
    store.set_pinned(ids[0], True)
    store.open_session(ids[1])
    planned = store.delete_oldest_sessions(4, dry_run=True)
    assert planned == [ids[2], ids[3]]
    assert store.count_sessions() == 6
    assert store.delete_oldest_sessions(4) == planned
    assert {s.session_id for s in store.list_sessions()} == {ids[0], ids[1], ids[4], ids[5]}
    assert store.delete_oldest_sessions(10) == []
    # protected sessions count towards those kept: the others make room for them
    assert store.delete_oldest_sessions(2) == [ids[4], ids[5]]
    with pytest.raises(SessionError, match="cannot keep -1"):
        store.delete_oldest_sessions(-1)


def test_max_sessions_is_applied_after_each_create(sessions_dir: Path) -> None:
    with ChatRecordingService(make_settings(sessions_dir, max_sessions=3)) as store:
        ids = []
        for n in range(5):
            sid = store.create_session("m", "p")
            store.record_message(sid, SessionMessage.user(f"message {n}"))
            store.close_session(sid)
            ids.append(sid)
        assert {s.session_id for s in store.list_sessions()} == set(ids[-3:])


def test_import_validates_and_refuses_an_existing_id_unless_asked(
    store: ChatRecordingService,
) -> None:
    now = now_iso()
    session = Session(
        session_id="11111111-2222-4333-8444-555555555555",
        start_time=now,
        last_activity=now,
        model="m",
        provider="p",
        messages=[SessionMessage.user("imported words")],
    )
    sid = store.import_session(session)
    assert sid == session.session_id and not store.is_open(sid)
    assert store.get_session(sid).messages == session.messages
    assert store.search("imported")[0].session_id == sid
    with pytest.raises(SessionError, match="already exists") as raised:
        store.import_session(session)
    assert "--new-id" in (raised.value.hint or "")
    other = store.import_session(session, new_id=True)
    assert other != sid and store.get_session(other).messages == session.messages
    broken = Session.model_construct(
        session_id="../../etc/passwd",
        start_time="yesterday",
        last_activity=now,
        model="m",
        provider="p",
        messages=[],
        tool_calls=[],
        metadata=session.metadata,
    )
    with pytest.raises(SessionError, match="invalid"):
        store.import_session(broken)


def test_fields_we_do_not_know_are_kept_through_load_and_save(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = store.create_session("m", "p")
    store.close_session(sid)
    path = sessions_dir / f"{sid}.json"
    data = orjson.loads(path.read_bytes())
    data["futureField"] = {"x": 1}
    data["metadata"]["futureMeta"] = [1, 2]
    written = path.stat().st_mtime_ns
    path.write_bytes(orjson.dumps(data))
    # changed on disk, whatever the filesystem's timestamp tick: a second later than it was
    os.utime(path, ns=(written + 1_000_000_000, written + 1_000_000_000))
    store.open_session(sid)
    store.record_message(sid, SessionMessage.user("hi"))
    store.close_session(sid)
    saved = orjson.loads(path.read_bytes())
    assert saved["futureField"] == {"x": 1} and saved["metadata"]["futureMeta"] == [1, 2]
    assert store.get_session(sid).model_extra == {"futureField": {"x": 1}}


def test_reindex_rebuilds_the_index_from_the_files(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    ids = _aged(store, 3)
    live = store.create_session("m", "p")
    store.record_message(live, SessionMessage.user("unsaved words"))
    assert store.reindex() == 4
    assert store.search("unsaved")[0].session_id == live
    for suffix in ("", "-wal", "-shm"):
        index_file = Path(str(sessions_dir / ".index" / "sessions.sqlite") + suffix)
        index_file.unlink(missing_ok=True)
    with ChatRecordingService(store.settings) as fresh:
        assert {s.session_id for s in fresh.list_sessions()} == {*ids, live}


def test_a_damaged_index_is_rebuilt(store: ChatRecordingService, sessions_dir: Path) -> None:
    ids = _aged(store, 2)
    store.close()
    (sessions_dir / ".index" / "sessions.sqlite").write_bytes(b"this is not sqlite" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(sessions_dir / ".index" / "sessions.sqlite") + suffix).unlink(missing_ok=True)
    with ChatRecordingService(make_settings(sessions_dir)) as fresh:
        assert {s.session_id for s in fresh.list_sessions()} == set(ids)
        assert not fresh._index.in_memory


def test_close_saves_every_open_session(store: ChatRecordingService, sessions_dir: Path) -> None:
    ids = [store.create_session("m", "p") for _ in range(3)]
    for sid in ids:
        store.record_message(sid, SessionMessage.user(f"in {sid}"))
    store.close()
    for sid in ids:
        assert len(_file(store, sid)["messages"]) == 1
    assert not list((sessions_dir / ".journal").glob("*.wal"))
    assert not list((sessions_dir / ".locks").glob("*.lock"))


def test_notices_nobody_takes_keep_the_latest_not_all(tmp_path: Path) -> None:
    # a service's store is open for days; nobody may ever take its retention notices
    from ollm_cli.pipeline.recording._store import MAX_NOTICES

    store = ChatRecordingService(make_settings(tmp_path / "s", max_sessions=1))
    for _ in range(MAX_NOTICES + 20):
        store.close_session(store.create_session("m", "p"))
    notices = store.take_notices()
    assert len(notices) == MAX_NOTICES
    assert all("maxSessions" in line for line in notices)
    assert store.take_notices() == []
    store.close()
