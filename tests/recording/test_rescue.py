"""Rescue files are private and vouched for: only the user's own, with the home's keyed
digest, are replayed; a forged or foreign one is refused and named, never replayed.

The attacks are run by a real second local user (:mod:`tests.second_user`)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.paths import ollm_home
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._journal import JournalEntry, encode_frame, log_files, read_log
from ollm_cli.pipeline.recording._rescue import (
    KEY_NAME,
    OLD_HEADER_PREFIX,
    _folder_key,
    candidate_dirs,
    default_rescue_dirs,
    find_rescues,
    rescue_key,
    write_rescue,
)
from ollm_cli.pipeline.records import SessionMessage
from tests.recording.conftest import make_settings
from tests.second_user import intruder


def _sessions_entries(folder: Path, count: int, text: str) -> list[JournalEntry]:
    """The journal records of ``count`` new sessions, each with one user message."""
    with ChatRecordingService(make_settings(folder)) as maker:
        for _ in range(count):
            sid = maker.create_session("m", "p")
            maker.record_message(sid, SessionMessage.user(text))
        entries = [e for path in log_files(folder / ".journal") for e in read_log(path).entries]
    return entries


def _rescue_name(data_dir: Path) -> str:
    return f"{_folder_key(data_dir)}-{1:020d}-1.rescue"


def _old_format(data_dir: Path, entries: list[JournalEntry]) -> bytes:
    """A rescue file as OLLM wrote (and replayed, unchecked) before it had a digest."""
    header = OLD_HEADER_PREFIX + orjson.dumps({"dataDir": str(data_dir.resolve())}) + b"\n"
    return header + b"".join(encode_frame(e) for e in entries)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A folder any user may read, and write only with the sticky bit's rules (like /tmp)."""
    folder = Path(tempfile.mkdtemp(prefix="ollm-test-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_rescue_file_is_written_privately_and_replayed(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with ChatRecordingService(make_settings(sessions)) as store:
        sid = store.create_session("m", "p")
    before = (sessions / f"{sid}.json").read_bytes()
    with ChatRecordingService(make_settings(sessions)) as store:
        store.record_message(sid, SessionMessage.user("rescued"))
        entries = [
            e
            for path in log_files(sessions / ".journal")
            for e in read_log(path).entries
            if e.seq > 0
        ]
    (sessions / f"{sid}.json").write_bytes(before)  # as if the disk had refused the record
    key = rescue_key(create=True)
    assert key is not None
    key_file = ollm_home() / KEY_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    path = write_rescue(sessions, entries, key=key)
    assert path is not None and path.parent == ollm_home() / "rescue"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [r.path for r in find_rescues(sessions, key=key).found] == [path]
    with ChatRecordingService(make_settings(sessions)) as store:
        assert [m.text for m in store.get_session(sid).messages] == ["rescued"]
        assert any("replayed 1 record" in n for n in store.take_notices())
    assert not path.exists()


def test_no_rescue_folder_is_a_fixed_name_in_a_shared_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "runtime"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    folders = default_rescue_dirs()
    shared_places = {Path("/tmp"), Path("/dev/shm"), Path(tempfile.gettempdir())}
    assert all(f.parent not in shared_places for f in folders)
    assert shared / "ollm-rescue" not in folders  # open to others: not used
    shared.chmod(0o700)
    assert default_rescue_dirs()[0] == shared / "ollm-rescue"


def test_a_forged_rescue_file_of_the_user_is_refused_and_named(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with ChatRecordingService(make_settings(sessions)) as store:
        real = store.create_session("m", "p")
    forged = _sessions_entries(tmp_path / "elsewhere", 3, "send this to the model")
    key = rescue_key(create=True)
    path = write_rescue(sessions, forged, key=b"k" * 32)  # not the home's key
    assert path is not None
    old = path.with_name(_rescue_name(sessions))
    old.write_bytes(_old_format(sessions, forged))
    scan = find_rescues(sessions, key=key)
    assert scan.found == []
    reasons = {r.path: r.reason for r in scan.refused}
    assert "digest does not match" in reasons[path]
    assert "no digest" in reasons[old]

    with ChatRecordingService(make_settings(sessions)) as store:
        assert [s.session_id for s in store.list_sessions()] == [real]
        notices = store.take_notices()
        assert any(str(path) in n and "refused" in n for n in notices)
        assert any(str(old) in n for n in notices)
        kinds = {(f.kind, f.subject) for f in store.doctor()}
        assert ("rescue-refused", str(path)) in kinds
    assert path.exists() and old.exists()  # left in place, for the user to look at


def test_a_rescue_file_with_altered_records_is_refused(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    key = rescue_key(create=True)
    entries = _sessions_entries(tmp_path / "elsewhere", 1, "original")
    path = write_rescue(sessions, entries, key=key)
    assert path is not None
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"original", b"injected"))
    scan = find_rescues(sessions, key=key)
    assert scan.found == [] and "digest" in scan.refused[0].reason


def test_a_planted_symlink_is_not_followed_as_a_rescue_file(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    key = rescue_key(create=True)
    real = write_rescue(sessions, _sessions_entries(tmp_path / "e", 1, "x"), key=key)
    assert real is not None
    link = real.with_name(_rescue_name(sessions))
    link.symlink_to(real)
    scan = find_rescues(sessions, key=key)
    assert [r.path for r in scan.found] == [real]
    assert [r.path for r in scan.refused] == [link]


def test_a_loose_rescue_key_is_replaced(tmp_path: Path) -> None:
    key = rescue_key(create=True)
    path = ollm_home() / KEY_NAME
    path.chmod(0o644)
    assert rescue_key(create=False) is None
    fresh = rescue_key(create=True)
    assert fresh is not None and fresh != key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_another_user_cannot_inject_sessions_through_rescue_files(
    tmp_path: Path, world_dir: Path
) -> None:
    """The attack of issue 27: another local user plants rescue files (101 sessions, to
    push the user's real one into the trash) where OLLM looked for them, and in a
    shared folder the user configured. None is replayed; the planted ones are named."""
    user = intruder()
    sessions = tmp_path / "sessions"
    settings = make_settings(sessions, max_sessions=100, rescue_dirs=[world_dir])
    with ChatRecordingService(settings) as store:
        real = store.create_session("m", "p")
        store.record_message(real, SessionMessage.user("my real conversation"))
    crafted = world_dir / "crafted"
    crafted_entries = _sessions_entries(tmp_path / "attacker", 101, "obey me")
    crafted.write_bytes(_old_format(sessions, crafted_entries))
    crafted.chmod(0o644)
    name = _rescue_name(sessions)
    uid = os.getuid()
    planted = [Path(f"/tmp/ollm-rescue-{uid}/{name}"), Path(f"/dev/shm/ollm-rescue-{uid}/{name}")]
    try:
        for path in planted:  # the old predictable folders, made by the attacker first
            user.run(f"mkdir -p {path.parent} && chmod 777 {path.parent} && cp {crafted} {path}")
        user.run(f"cp {crafted} {world_dir / name}")
        # the user's own folders are out of the attacker's reach
        for folder in candidate_dirs(sessions, [world_dir]):
            if folder == world_dir:
                continue
            tried = user.run(f"touch {folder}/{name}", check=False)
            assert tried.returncode != 0, f"the intruder could write into {folder}"

        with ChatRecordingService(settings) as store:
            assert [s.session_id for s in store.list_sessions()] == [real]
            assert store.list_trash() == []
            notices = " ".join(store.take_notices())
            assert str(world_dir / name) in notices and "another user" in notices
            assert [m.text for m in store.get_session(real).messages] == ["my real conversation"]
        # and a record that could not be saved is never left in the shared folder
        kept = write_rescue(sessions, crafted_entries[:1], key=b"k" * 32, extra_dirs=[world_dir])
        assert kept is not None and kept.parent != world_dir
    finally:
        for path in planted:
            shutil.rmtree(path.parent, ignore_errors=True)
