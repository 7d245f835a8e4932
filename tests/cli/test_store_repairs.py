"""Reading never changes the store; repairs happen in writers or ``ollm sessions doctor``;
retention goes to a trash folder; special files are refused at once; a damaged journal
frame is named and what follows it recovered."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.errors import SessionCorruptError, SessionError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._journal import log_files, scan_frames
from ollm_cli.pipeline.records import SessionMessage
from tests.cli.conftest import invoke, run_ollm


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file of the store but the derived index: name -> (size, mtime)."""
    found: dict[str, tuple[int, int]] = {}
    for path in sorted(folder.rglob("*")):
        if ".index" in path.parts or not path.is_file():
            continue
        st = path.stat()
        found[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return found


def one_session(open_test_store: Callable[[], ChatRecordingService], *texts: str) -> str:
    store = open_test_store()
    try:
        sid = store.create_session("m", "p")
        for text in texts:
            store.record_message(sid, SessionMessage.user(text))
        return sid
    finally:
        store.close()


# -- 4. read-only commands never change the store -------------------------------------------------


def test_a_lone_surrogate_is_shown_and_nothing_is_moved(
    open_test_store: Callable[[], ChatRecordingService], sessions_dir: Path
) -> None:
    sid = one_session(open_test_store, "placeholder")
    path = sessions_dir / f"{sid}.json"
    path.write_bytes(path.read_bytes().replace(b"placeholder", b"bad \\ud800 text"))
    before = snapshot(sessions_dir)
    for args in (["list"], ["view", sid[:8]], ["search", "text"], ["export", sid[:8]]):
        outcome = invoke(*args)
        assert outcome.exit_code == 0, (args, outcome.stderr)
    assert "bad \ufffd text" in invoke("view", sid[:8]).stdout
    assert snapshot(sessions_dir) == before
    assert not [n for n in os.listdir(sessions_dir) if ".corrupt-" in n]


def test_a_damaged_file_is_named_by_readers_and_left_for_doctor(
    open_test_store: Callable[[], ChatRecordingService], sessions_dir: Path
) -> None:
    sid = one_session(open_test_store, "one")
    path = sessions_dir / f"{sid}.json"
    shutil.rmtree(sessions_dir / ".journal", ignore_errors=True)
    path.write_bytes(b'{"sessionId": "truncated')
    before = snapshot(sessions_dir)
    listed = invoke("list")
    assert listed.exit_code == 0
    assert f"{sid}.json is damaged" in listed.stderr
    viewed = invoke("view", sid)
    assert viewed.exit_code == 4 and isinstance(viewed.exception, SessionCorruptError)
    assert f"{sid}.json is damaged" in viewed.stderr and "doctor --fix" in viewed.stderr
    assert snapshot(sessions_dir) == before

    report = invoke("doctor")
    assert report.exit_code == 0
    assert "corrupt" in report.stdout and f"{sid}.json" in report.stdout
    assert snapshot(sessions_dir) == before  # doctor without --fix changes nothing
    fixed = invoke("doctor", "--fix")
    assert fixed.exit_code == 0 and "fixed" in fixed.stdout
    assert [n for n in os.listdir(sessions_dir) if n.startswith(f"{sid}.json.corrupt-")]


def test_doctor_finds_and_fixes_orphaned_journals_stale_locks_and_index_drift(
    open_test_store: Callable[[], ChatRecordingService], sessions_dir: Path, tmp_path: Path
) -> None:
    sid = one_session(open_test_store, "kept")
    # an orphaned journal: the log of a store that died with records not in the file
    store = open_test_store()
    store.open_session(sid)
    store.record_message(sid, SessionMessage.user("only in the journal"))
    [log] = log_files(sessions_dir / ".journal")
    orphan = tmp_path / "orphan.wal"
    shutil.copy(log, orphan)
    store.close()
    shutil.copy(orphan, log)
    (sessions_dir / f"{sid}.json").write_bytes(
        (sessions_dir / f"{sid}.json").read_bytes()
    )  # the file as it was: journaled record not in it
    (sessions_dir / ".locks").mkdir(exist_ok=True)
    (sessions_dir / ".locks" / "0f0f0f0f-0000-4000-8000-000000000000.lock").write_text("1\n")
    # index drift: a file copied in by hand
    other = one_session(open_test_store, "x")
    copy_id = "12345678-1234-4234-8234-123456789abc"
    data = orjson.loads((sessions_dir / f"{other}.json").read_bytes())
    data["sessionId"] = copy_id
    (sessions_dir / f"{copy_id}.json").write_bytes(orjson.dumps(data))

    report = invoke("doctor", "--json")
    kinds = {f["kind"] for f in orjson.loads(report.stdout)}
    assert {"stale-lock", "index-drift"} <= kinds
    fixed = invoke("doctor", "--fix", "--json")
    assert fixed.exit_code == 0
    assert all(f["fixed"] or f["kind"] == "quarantined" for f in orjson.loads(fixed.stdout))
    assert orjson.loads(invoke("doctor", "--json").stdout) == []


# -- 5. special files are refused at once ---------------------------------------------------------


def test_importing_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "session.json"
    os.mkfifo(fifo)
    done = run_ollm("import", str(fifo))  # a real process: a hang would time out
    assert done.returncode == 4, done.stderr
    assert "FIFO" in done.stderr and "not a regular file" in done.stderr


def test_importing_a_device_is_refused(tmp_path: Path) -> None:
    outcome = invoke("import", "/dev/zero")
    assert outcome.exit_code == 4 and "a device" in outcome.stderr


def test_a_fifo_named_like_a_session_never_hangs_a_listing(
    open_test_store: Callable[[], ChatRecordingService], sessions_dir: Path
) -> None:
    one_session(open_test_store, "real")
    os.mkfifo(sessions_dir / "12345678-1234-4234-8234-123456789abc.json")
    done = run_ollm("list", "--json")
    assert done.returncode == 0, done.stderr
    assert len(orjson.loads(done.stdout)) == 1


# -- 7. a flipped byte in the middle of the journal -----------------------------------------------


def test_a_bad_checksum_mid_journal_is_named_and_later_frames_recovered(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    settings = SessionSettings(data_dir=folder, max_sessions=0, group_commit_ms=0)
    store = ChatRecordingService(settings)
    first, second = store.create_session("m", "p"), store.create_session("m", "p")
    store.record_message(first, SessionMessage.user("first 1"))
    store.record_message(second, SessionMessage.user("second 1"))  # the frame we damage
    store.record_message(first, SessionMessage.user("first 2"))
    store.record_message(first, SessionMessage.user("first 3"))
    crashed = tmp_path / "crashed"
    shutil.copytree(folder, crashed, ignore=shutil.ignore_patterns(".locks"))
    store._journal.close()
    for state in store._open.values():
        state.file_lock.release()
    [log] = log_files(crashed / ".journal")
    data = bytearray(log.read_bytes())
    where = data.index(b"second 1")
    data[where] ^= 0xFF
    log.write_bytes(bytes(data))
    scan = scan_frames(bytes(data))
    assert len(scan.damaged) == 1 and scan.torn_bytes == 0
    with ChatRecordingService(settings.model_copy(update={"data_dir": crashed})) as after:
        report = " ".join(after.recovery_report)
        assert "failed their checksum" in report and "at its end" not in report
        texts = [m.text for m in after.get_session(first).messages]
        assert texts == ["first 1", "first 2", "first 3"]
        assert after.get_session(second).messages == []


# -- 8. retention never deletes silently ----------------------------------------------------------


def test_max_sessions_moves_the_oldest_to_the_trash_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "sessions"
    settings = SessionSettings(data_dir=folder, max_sessions=2, group_commit_ms=0, trash_days=7)
    with ChatRecordingService(settings) as store:
        pinned = store.create_session("m", "p", title="pinned one")
        store.set_pinned(pinned, True)
        old = store.create_session("m", "p", title="old one")
        store.record_message(old, SessionMessage.user("remember me"))
        store.close_session(old)
        store.close_session(pinned)
        assert store.take_notices() == []
        newest = store.create_session("m", "p", title="newest")
        [notice] = store.take_notices()
        assert "maxSessions (2) moved 1" in notice and old[:8] in notice
        assert "trash restore" in notice
        assert {s.session_id for s in store.list_sessions()} == {pinned, newest}
        [entry] = store.list_trash()
        assert entry.session_id == old and entry.title == "old one"
    monkeypatch.setenv("OLLM_SERVICES__SESSION__DATA_DIR", str(folder))
    from ollm_cli.cli import state

    state.reset()
    listed = invoke("trash", "list")
    assert old[:8] in listed.stdout
    restored = invoke("trash", "restore", old[:8])
    assert restored.exit_code == 0, restored.stderr
    with ChatRecordingService(settings.model_copy(update={"max_sessions": 0})) as store:
        assert [m.text for m in store.get_session(old).messages] == ["remember me"]
        assert store.list_trash() == []


def test_trash_older_than_trash_days_is_emptied_and_said(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    settings = SessionSettings(data_dir=folder, max_sessions=1, group_commit_ms=0, trash_days=1)
    with ChatRecordingService(settings) as store:
        first = store.create_session("m", "p")
        store.close_session(first)
        store.create_session("m", "p")
        store.take_notices()
        [entry] = store.list_trash()
        aged = folder / ".trash" / f"{entry.session_id}.json"
        past = time.time() - 2 * 86400
        os.utime(aged, (past, past))
        for sid in store.open_sessions:
            store.close_session(sid)
        store.create_session("m", "p")
        [notice] = store.take_notices()
        assert "1 expired from the trash" in notice
        assert not aged.exists()


def test_an_active_session_is_never_moved_to_the_trash(tmp_path: Path) -> None:
    settings = SessionSettings(data_dir=tmp_path / "s", max_sessions=1, group_commit_ms=0)
    with ChatRecordingService(settings) as writer, ChatRecordingService(settings) as other:
        busy = writer.create_session("m", "p")  # held open by another store
        other.create_session("m", "p")
        assert busy in {s.session_id for s in other.list_sessions()}
        assert other.list_trash() == []


# -- 9. small ones ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "said"),
    [
        ("   ", "cannot be empty"),
        ("work,ci", "holds a comma"),
        ("x" * 65, "65 characters long"),
        ("bell\x07", "control characters"),
    ],
)
def test_bad_tags_are_refused_with_what_is_wrong(
    open_test_store: Callable[[], ChatRecordingService], tag: str, said: str
) -> None:
    sid = one_session(open_test_store, "hi")
    outcome = invoke("tag", sid[:8], tag)
    assert outcome.exit_code in {2, 4}
    assert said in outcome.stderr
    store = open_test_store()
    try:
        assert store.get_session(sid).metadata.tags == []
        with pytest.raises(SessionError, match=said):
            store.create_session("m", "p", tags=[tag])
    finally:
        store.close()


def test_random_bytes_are_called_not_valid_utf8(tmp_path: Path) -> None:
    noise = tmp_path / "noise.json"
    noise.write_bytes(bytes([0x7B, 0x22, 0xFF, 0xFE, 0x80, 0x22, 0x7D]))
    outcome = invoke("import", str(noise))
    assert outcome.exit_code == 4
    assert "not valid UTF-8 (byte 0xff at offset 2)" in outcome.stderr
    assert "surrogates" not in outcome.stderr
