"""Recovery: journals of processes that died are folded into their sessions.

"A process that died" is made here by copying a live store's folder (files
and journal as they are on disk, without its locks): the copy's journal is
not locked by anyone, as the journal of a dead process is not.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.recording._journal import JournalEntry, encode_frame, log_files
from ollm_cli.pipeline.recording._store import ChatRecordingService
from ollm_cli.pipeline.records import Session, SessionMessage
from tests.recording.conftest import make_settings


def _crash_copy(store: ChatRecordingService, where: Path) -> Path:
    shutil.copytree(store.data_dir, where, ignore=shutil.ignore_patterns(".locks"))
    return where


def _texts(session: Session) -> list[str]:
    return [m.text for m in session.messages]


def test_a_dead_journal_waits_for_a_session_another_process_holds(
    store: ChatRecordingService, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("journaled only"))
    crashed = _crash_copy(store, tmp_path / "crashed")
    shutil.move(crashed / ".journal", tmp_path / "journal")
    holder = ChatRecordingService(make_settings(crashed))  # holds the session (and writes nothing)
    holder.open_session(sid)
    shutil.move(tmp_path / "journal", crashed / ".journal")
    with ChatRecordingService(make_settings(crashed)) as other:
        assert len(log_files(crashed / ".journal")) == 1  # kept: its session is held
        assert _texts(other.get_session(sid)) == ["journaled only"]
    holder.close()
    with ChatRecordingService(make_settings(crashed)) as later:
        assert _texts(later.get_session(sid)) == ["journaled only"]
    assert log_files(crashed / ".journal") == []
    assert _texts(Session.from_json((crashed / f"{sid}.json").read_bytes())) == ["journaled only"]


def test_a_dead_journal_of_a_deleted_session_brings_nothing_back(
    store: ChatRecordingService, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("to be deleted"))
    crashed = _crash_copy(store, tmp_path / "crashed")
    (crashed / f"{sid}.json").unlink()
    with ChatRecordingService(make_settings(crashed)) as after:
        assert after.list_sessions() == []
    assert log_files(crashed / ".journal") == []


def test_a_session_whose_file_was_moved_aside_is_rebuilt_from_a_dead_journal(
    store: ChatRecordingService, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p", title="rebuilt")
    store.record_message(sid, SessionMessage.user("only in the journal"))
    crashed = _crash_copy(store, tmp_path / "crashed")
    (crashed / f"{sid}.json").rename(crashed / f"{sid}.json.corrupt-20240101T000000Z")
    with ChatRecordingService(make_settings(crashed)) as after:
        session = after.get_session(sid)
        assert _texts(session) == ["only in the journal"]
        assert session.metadata.title == "rebuilt"
        assert any("rebuilt" in line for line in after.recovery_report)
    assert (crashed / f"{sid}.json").exists()


def test_a_corrupt_file_met_while_listing_without_a_journal_is_left_out(
    store: ChatRecordingService, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("kept in the journal"))
    store.save_session(sid)
    crashed = _crash_copy(store, tmp_path / "crashed")
    with ChatRecordingService(make_settings(crashed)) as after:  # folds the dead journal in
        assert log_files(crashed / ".journal") == []
        (crashed / f"{sid}.json").write_text("{ damaged")
        after.reindex()
        assert after.list_sessions() == []
        assert list(crashed.glob(f"{sid}.json.corrupt-*"))


def test_a_corrupt_file_met_while_listing_is_rewritten_by_its_open_writer(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("in memory"))
    store.save_session(sid)
    (sessions_dir / f"{sid}.json").write_text("not json")
    store.reindex()
    assert [s.session_id for s in store.list_sessions()] == [sid]
    assert _texts(Session.from_json((sessions_dir / f"{sid}.json").read_bytes())) == ["in memory"]
    assert list(sessions_dir.glob(f"{sid}.json.corrupt-*"))


def test_a_corrupt_file_met_while_listing_is_rebuilt_when_nobody_holds_it(
    store: ChatRecordingService, sessions_dir: Path, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("from a live journal"))
    crashed = _crash_copy(store, tmp_path / "crashed")
    (crashed / f"{sid}.json").write_text("[]")
    journal = crashed / ".journal"
    kept = tmp_path / "kept-journal"
    shutil.move(journal, kept)  # hide the journal while the store starts...
    with ChatRecordingService(make_settings(crashed)) as after:
        shutil.move(kept, journal)  # ...so that the listing is the first to meet the file
        after.reindex()  # moves the file aside, rebuilds it from the journal, writes it
        after.reindex()
        assert [s.session_id for s in after.list_sessions()] == [sid]
        assert _texts(after.get_session(sid)) == ["from a live journal"]


def test_replay_stops_at_a_missing_record(
    sessions_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ChatRecordingService(make_settings(sessions_dir)) as store:
        sid = store.create_session("m", "p")
    data = orjson.loads((sessions_dir / f"{sid}.json").read_bytes())
    epoch = data["revision"]["epoch"]
    frames = [
        JournalEntry(sid, epoch, seq, orjson.dumps({"m": SessionMessage.user(f"{seq}").to_dict()}))
        for seq in (1, 2, 4)
    ]
    (sessions_dir / ".journal").mkdir(exist_ok=True)
    (sessions_dir / ".journal" / "00-dead.wal").write_bytes(b"".join(map(encode_frame, frames)))
    with (
        caplog.at_level(logging.WARNING),
        ChatRecordingService(make_settings(sessions_dir)) as after,
    ):
        assert _texts(after.get_session(sid)) == ["1", "2"]
    assert "journal record 3 missing" in caplog.text


def test_a_journal_without_a_usable_creation_record_cannot_rebuild(sessions_dir: Path) -> None:
    sid = "12345678-1234-4234-8234-123456789012"
    sessions_dir.mkdir(parents=True)
    (sessions_dir / f"{sid}.json.corrupt-x").write_text("junk")
    (sessions_dir / ".journal").mkdir()
    bad_header = encode_frame(JournalEntry(sid, 9, 0, orjson.dumps({"n": 5})))
    (sessions_dir / ".journal" / "00-dead.wal").write_bytes(bad_header)
    with ChatRecordingService(make_settings(sessions_dir)) as store:
        assert store.list_sessions() == []
    assert not (sessions_dir / f"{sid}.json").exists()
    (sessions_dir / ".journal" / "01-dead.wal").write_bytes(
        encode_frame(JournalEntry(sid, 9, 0, orjson.dumps({"n": {"model": 1}})))
    )
    with ChatRecordingService(make_settings(sessions_dir)) as store:
        assert store.list_sessions() == []


def test_cleanup_skips_sessions_other_processes_hold(store: ChatRecordingService) -> None:
    ids = []
    for n in range(3):
        sid = store.create_session("m", "p")
        store.record_message(sid, SessionMessage.user(str(n)))
        store.close_session(sid)
        ids.append(sid)
    with ChatRecordingService(store.settings) as other:
        other.open_session(ids[0])
        assert store.delete_oldest_sessions(2, dry_run=True) == [ids[1]]
        assert store.delete_oldest_sessions(2) == [ids[1]]
    assert {s.session_id for s in store.list_sessions()} == {ids[0], ids[2]}


def test_saving_a_session_that_is_not_open_here_does_nothing(store: ChatRecordingService) -> None:
    sid = store.create_session("m", "p")
    store.close_session(sid)
    before = (store.data_dir / f"{sid}.json").stat().st_mtime_ns
    store.save_session(sid)
    assert (store.data_dir / f"{sid}.json").stat().st_mtime_ns == before


def test_last_activity_in_another_format_still_never_goes_back(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = store.create_session("m", "p")
    store.close_session(sid)
    path = sessions_dir / f"{sid}.json"
    data = orjson.loads(path.read_bytes())
    data["lastActivity"] = "2999-01-01T00:00:00+00:00"
    path.write_bytes(orjson.dumps(data))
    store.record_message(sid, SessionMessage.user("the clock is behind"))
    assert store.get_session(sid).last_activity == "2999-01-01T00:00:00+00:00"
