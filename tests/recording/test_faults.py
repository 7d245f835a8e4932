"""Faults: each gets its clear error, and nothing already saved is lost.

A corrupt file, a torn journal, a full disk (a real 256 KiB tmpfs, and a
writer that fails on purpose), a read-only folder (a read-only bind mount:
we run as root, whom permission bits do not stop), and identifiers such as
``../../etc/passwd``.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.errors import (
    InvalidSessionIdError,
    SessionCorruptError,
    SessionError,
    SessionNotFoundError,
    StorageError,
)
from ollm_cli.pipeline.recording._journal import encode_frame, log_files
from ollm_cli.pipeline.recording._store import ChatRecordingService
from ollm_cli.pipeline.records import Session, SessionMessage
from tests.recording.conftest import make_settings, mounted_tmpfs, read_only


def _texts(session: Session) -> list[str]:
    return [m.text for m in session.messages]


def _fill(path: Path) -> None:
    """Write ``path`` until the disk is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def _saved_session(store: ChatRecordingService, texts: list[str]) -> str:
    sid = store.create_session("m", "p")
    for text in texts:
        store.record_message(sid, SessionMessage.user(text))
    store.close_session(sid)
    return sid


# -- a corrupt session file -------------------------------------------------------------------


def test_a_corrupt_file_is_moved_aside_with_a_clear_error_and_listing_goes_on(
    store: ChatRecordingService, sessions_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = _saved_session(store, ["keep me"])
    bad = _saved_session(store, ["lost"])
    # the journal no longer holds the bad session's history once the store that wrote it
    # has closed cleanly, so it cannot be rebuilt
    store.close()
    path = sessions_dir / f"{bad}.json"
    path.write_bytes(b'{"sessionId": "' + bad.encode() + b'", "messages": [tru')
    with ChatRecordingService(make_settings(sessions_dir)) as reader:
        with pytest.raises(SessionCorruptError) as raised:
            reader.get_session(bad)
        message = str(raised.value)
        assert "damaged" in message and ".corrupt-" in message and "start a new session" in message
        assert not path.exists()
        aside = list(sessions_dir.glob(f"{bad}.json.corrupt-*"))
        assert len(aside) == 1 and aside[0].read_bytes().endswith(b"[tru")
        assert [s.session_id for s in reader.list_sessions()] == [good]
        assert _texts(reader.get_session(good)) == ["keep me"]
        assert reader.recovery_report and "moved to" in reader.recovery_report[0]
        # a new session can be started as usual (10.2)
        fresh = reader.create_session("m", "p")
        assert reader.count_sessions() == 2 and fresh != bad
        reader.delete_session(good)  # deleting removes damaged copies of a session too
    assert aside[0].exists()


def test_a_corrupt_file_found_while_listing_never_breaks_the_listing(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    ids = [_saved_session(store, [f"session {n}"]) for n in range(3)]
    store.close()
    (sessions_dir / f"{ids[1]}.json").write_text("not json at all")
    (sessions_dir / f"{ids[2]}.json").write_bytes(orjson.dumps({"sessionId": ids[2]}))
    with ChatRecordingService(make_settings(sessions_dir)) as reader:
        assert [s.session_id for s in reader.list_sessions()] == [ids[0]]
        assert len(list(sessions_dir.glob("*.corrupt-*"))) == 2
        with pytest.raises(SessionNotFoundError):
            reader.get_session(ids[1])


def test_a_corrupt_file_is_rebuilt_from_the_journal_when_it_holds_the_whole_session(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = store.create_session("m", "p", title="from the journal")
    for n in range(5):
        store.record_message(sid, SessionMessage.user(f"message {n}"))
    # the writer is still running: its journal holds every record since the creation
    (sessions_dir / f"{sid}.json").write_bytes(b"\x00garbage")
    with ChatRecordingService(make_settings(sessions_dir)) as reader:
        recovered = reader.get_session(sid)
        assert _texts(recovered) == [f"message {n}" for n in range(5)]
        assert recovered.metadata.title == "from the journal"
        assert any("rebuilt from its journal" in line for line in reader.recovery_report)
    # the writer saves its whole session again at the next turn end
    store.record_message(sid, SessionMessage.user("message 5"))
    store.save_session(sid)
    saved = Session.from_json((sessions_dir / f"{sid}.json").read_bytes())
    assert len(saved.messages) == 6


def test_a_file_with_an_invalid_message_is_treated_as_corrupt(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    sid = _saved_session(store, ["fine"])
    store.close()
    path = sessions_dir / f"{sid}.json"
    data = orjson.loads(path.read_bytes())
    data["messages"][0]["role"] = "wizard"
    path.write_bytes(orjson.dumps(data))
    with ChatRecordingService(make_settings(sessions_dir)) as reader:
        with pytest.raises(SessionCorruptError, match=r"wizard|role"):
            reader.open_session(sid)
        assert list(sessions_dir.glob(f"{sid}.json.corrupt-*"))


# -- a torn journal ----------------------------------------------------------------------------


def test_a_torn_journal_tail_is_dropped_and_reported_and_the_rest_recovered(
    store: ChatRecordingService, sessions_dir: Path, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    for n in range(10):
        store.record_message(sid, SessionMessage.user(f"message {n}"))
    # what a crash in the middle of a write leaves: the files, and a log whose last
    # record stops half way (the copy is not locked, as the log of a dead process)
    crashed = tmp_path / "crashed"
    shutil.copytree(sessions_dir, crashed, ignore=shutil.ignore_patterns(".locks"))
    [log] = log_files(crashed / ".journal")
    whole = log.read_bytes()
    from ollm_cli.pipeline.recording._journal import JournalEntry

    torn = encode_frame(JournalEntry(sid, 1, 999, orjson.dumps({"m": {"role": "user"}})))
    log.write_bytes(whole + torn[: len(torn) // 2])
    with ChatRecordingService(make_settings(crashed)) as after:
        assert _texts(after.get_session(sid)) == [f"message {n}" for n in range(10)]
        report = " ".join(after.recovery_report)
        assert "dropped" in report and "incomplete record" in report
        assert not log.exists(), "the folded journal is deleted"
        saved = Session.from_json((crashed / f"{sid}.json").read_bytes())
        assert len(saved.messages) == 10


def test_a_damaged_record_in_the_middle_stops_the_replay_there(
    store: ChatRecordingService, sessions_dir: Path, tmp_path: Path
) -> None:
    sid = store.create_session("m", "p")
    for n in range(6):
        store.record_message(sid, SessionMessage.user(f"message {n}"))
    crashed = tmp_path / "crashed"
    shutil.copytree(sessions_dir, crashed, ignore=shutil.ignore_patterns(".locks"))
    [log] = log_files(crashed / ".journal")
    data = bytearray(log.read_bytes())
    data[-5] ^= 0xFF  # flip a bit in the last record: its checksum fails
    log.write_bytes(bytes(data))
    with ChatRecordingService(make_settings(crashed)) as after:
        assert _texts(after.get_session(sid)) == [f"message {n}" for n in range(5)]


# -- a full disk ---------------------------------------------------------------------------------


def test_a_full_disk_never_raises_into_the_chat_and_loses_nothing(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "small", "256k") as disk:
        folder = disk / "sessions"
        store = ChatRecordingService(make_settings(folder))
        sid = store.create_session("m", "p")
        store.record_message(sid, SessionMessage.user("before the disk filled up"))
        store.save_session(sid)
        filler = disk / "filler"
        _fill(filler)
        texts = [f"while full {n}: " + "x" * 2000 for n in range(20)]
        for text in texts:  # no exception reaches the caller (10.1)
            store.record_message(sid, SessionMessage.user(text))
        store.save_session(sid)
        health = store.health()
        assert not health.ok and health.pending_writes > 0
        assert health.last_error and "No space left" in health.last_error
        assert sid in health.unsaved_sessions
        assert len(store.get_session(sid).messages) == 21  # kept in memory meanwhile
        filler.unlink()
        store.record_message(sid, SessionMessage.user("after space came back"))
        assert store.pending_writes == 0
        store.close()
        with ChatRecordingService(make_settings(folder)) as after:
            assert _texts(after.get_session(sid)) == [
                "before the disk filled up",
                *texts,
                "after space came back",
            ]


def test_creating_a_session_on_a_full_disk_is_a_clear_storage_error(tmp_path: Path) -> None:
    with (
        mounted_tmpfs(tmp_path / "tiny", "256k") as disk,
        ChatRecordingService(make_settings(disk / "sessions")) as store,
    ):
        old = store.create_session("m", "p")
        _fill(disk / "filler")
        with pytest.raises(StorageError, match="No space left") as raised:
            store.create_session("m", "p", title="x" * 100_000)
        assert raised.value.hint and "disk space" in raised.value.hint
        assert store.get_session(old).session_id == old


def test_failing_writes_are_logged_kept_and_retried(
    store: ChatRecordingService, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sid = store.create_session("m", "p")
    real_fdatasync = os.fdatasync
    failures = {"left": 3}

    def failing_fdatasync(fd: int) -> None:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise OSError(errno.EIO, "Input/output error")
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    secret_text = "the user's words, never in a log line"
    with caplog.at_level(logging.ERROR):
        store.record_message(sid, SessionMessage.user(secret_text))
    assert store.pending_writes == 1 and not store.health().ok
    assert "EIO" in caplog.text and secret_text not in caplog.text
    for n in range(3):  # next attempts: two more fail, then the third goes through
        store.record_message(sid, SessionMessage.user(f"next {n}"))
    assert store.pending_writes == 0 and store.health().ok
    store.close()
    with ChatRecordingService(store.settings) as after:
        assert _texts(after.get_session(sid)) == [secret_text, "next 0", "next 1", "next 2"]


def test_a_failed_save_is_retried_at_the_next_turn_end(
    store: ChatRecordingService, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("one"))
    real_replace = os.replace

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", failing_replace)
    store.save_session(sid)
    store.close_session(sid)  # the save fails: the session stays open, nothing is lost
    assert store.is_open(sid) and sid in store.health().unsaved_sessions
    monkeypatch.setattr(os, "replace", real_replace)
    store.save_session(sid)
    assert store.health().ok
    store.close_session(sid)
    assert not store.is_open(sid)
    assert _texts(Session.from_json((store.data_dir / f"{sid}.json").read_bytes())) == ["one"]


# -- a read-only folder --------------------------------------------------------------------------


def test_a_read_only_folder_still_lists_and_reads_and_writes_catch_up_later(
    store: ChatRecordingService, sessions_dir: Path
) -> None:
    closed = _saved_session(store, ["saved before"])
    live = store.create_session("m", "p")
    store.record_message(live, SessionMessage.user("live before"))
    store.save_session(live)
    # a second writer holds a session but has not written its journal yet: under the
    # read-only folder it cannot create it
    other = _saved_session(store, ["other before"])
    late = ChatRecordingService(make_settings(sessions_dir))
    late.open_session(other)
    with read_only(sessions_dir):
        store.record_message(live, SessionMessage.user("while read-only"))  # no exception
        store.save_session(live)
        health = store.health()
        assert not health.ok and health.unsaved_sessions == [live]
        assert "Read-only file system" in (health.last_error or "")
        late.record_message(other, SessionMessage.user("other while read-only"))
        assert late.pending_writes == 1 and "Read-only" in (late.health().last_error or "")
        with ChatRecordingService(make_settings(sessions_dir)) as reader:
            assert {s.session_id for s in reader.list_sessions()} == {closed, live, other}
            assert _texts(reader.get_session(closed)) == ["saved before"]
            assert reader.search("saved")[0].session_id == closed
            with pytest.raises(StorageError, match="Read-only") as raised:
                reader.create_session("m", "p")
            assert "dataDir" in (raised.value.hint or "")
            with pytest.raises(StorageError):
                reader.set_title(closed, "cannot write")
        assert _texts(store.get_session(live)) == ["live before", "while read-only"]
    store.record_message(live, SessionMessage.user("writable again"))
    late.record_message(other, SessionMessage.user("other writable again"))
    assert store.pending_writes == 0 and late.pending_writes == 0
    late.close()
    store.close()
    with ChatRecordingService(make_settings(sessions_dir)) as after:
        assert _texts(after.get_session(live)) == [
            "live before",
            "while read-only",
            "writable again",
        ]
        assert _texts(after.get_session(closed)) == ["saved before"]
        assert _texts(after.get_session(other)) == [
            "other before",
            "other while read-only",
            "other writable again",
        ]


def test_an_unreadable_session_file_is_a_clear_error(
    store: ChatRecordingService, sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = _saved_session(store, ["x"])
    real_open = open

    def refusing_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith(f"{sid}.json"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", refusing_open)
    with pytest.raises(SessionError, match="cannot read session") as raised:
        store.get_session(sid)
    assert "new session" in (raised.value.hint or "")


# -- identifiers from users ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..",
        "",
        "   ",
        "abc",
        "zzzzzzzz",
        "550e8400/../x",
        "a" * 40,
    ],
)
def test_identifiers_that_are_not_session_ids_are_refused_before_any_path(
    store: ChatRecordingService, bad: str, tmp_path: Path
) -> None:
    sid = _saved_session(store, ["safe"])
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for action in (
        store.get_session,
        store.open_session,
        store.delete_session,
        store.resolve_id,
        lambda x: store.set_title(x, "t"),
        lambda x: store.record_message(x, SessionMessage.user("x")),
        store.save_session,
        store.close_session,
    ):
        with pytest.raises(InvalidSessionIdError) as raised:
            action(bad)
        assert raised.value.hint
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert Path("/etc/passwd").exists()
    assert _texts(store.get_session(sid)) == ["safe"]


def test_an_unknown_id_says_how_to_find_the_right_one(store: ChatRecordingService) -> None:
    with pytest.raises(SessionNotFoundError) as raised:
        store.get_session("00000000-0000-4000-8000-000000000000")
    assert "ollm sessions list" in (raised.value.hint or "")
    with pytest.raises(SessionNotFoundError):
        store.record_message("00000000-0000-4000-8000-000000000000", SessionMessage.user("x"))
    with pytest.raises(SessionNotFoundError):
        store.save_session("00000000-0000-4000-8000-000000000000")
