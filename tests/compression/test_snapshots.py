"""SnapshotManager: exact round trip, rolling cleanup, ids checked before they are
paths, damaged files, the restore override, thresholds."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import SessionSettings, SnapshotSettings
from ollm_cli.pipeline.compression._active_context import ActiveContext, checkpoint_message
from ollm_cli.pipeline.compression._snapshots import (
    INDEX_FILE,
    MAP_FILE,
    OVERRIDE_FILE,
    AmbiguousSnapshotIdError,
    ContextSnapshot,
    InvalidSnapshotIdError,
    SnapshotError,
    SnapshotManager,
    SnapshotNotFoundError,
    normalize_snapshot_id,
)
from ollm_cli.pipeline.errors import InvalidSessionIdError, SessionError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage
from tests.compression.conversations import SYSTEM_PROMPT, conversations, long_conversation

SID = "550e8400-e29b-41d4-a716-446655440000"
OTHER = "660e8400-e29b-41d4-a716-446655440001"


class FixedIds(SnapshotManager):
    """A manager whose snapshot ids are chosen by the test (to make prefixes collide)."""

    def __init__(self, settings: SnapshotSettings, ids: list[str]) -> None:
        super().__init__(settings)
        self.ids = ids

    def _new_id(self) -> str:
        return self.ids.pop(0)


@pytest.fixture
def settings(tmp_path: Path) -> SnapshotSettings:
    return SnapshotSettings(data_dir=tmp_path / "context-snapshots")


@pytest.fixture
def manager(settings: SnapshotSettings) -> SnapshotManager:
    return SnapshotManager(settings)


def context_of(messages: list[SessionMessage], summaries: int = 0) -> ActiveContext:
    return ActiveContext(
        system_prompt=SYSTEM_PROMPT,
        checkpoints=[checkpoint_message(f"## Goal\nsummary {i}") for i in range(summaries)],
        messages=messages,
        covers_through=summaries * 10,
        covered_head=min(summaries, len(messages)),
        head_positions=[i * 3 if i % 2 else None for i in range(min(summaries, len(messages)))],
    )


def snap(manager: SnapshotManager, context: ActiveContext, session_id: str = SID) -> str:
    return manager.create_snapshot(
        session_id, context, token_count=123, summary="test", reason="manual"
    ).id


@given(
    messages=conversations(max_exchanges=8),
    summaries=st.integers(0, 2),
    system_prompt=st.text(max_size=80),
)
def test_snapshot_round_trip_restores_exactly_what_was_captured(
    manager: SnapshotManager, messages: list, summaries: int, system_prompt: str
) -> None:
    context = context_of(messages, summaries).model_copy(update={"system_prompt": system_prompt})
    snapshot_id = snap(manager, context)
    restored = manager.restore_snapshot(snapshot_id)
    assert restored == context
    assert restored.to_dict() == context.to_dict()
    captured = manager.get_snapshot(snapshot_id)
    assert captured.user_messages == [m for m in messages if m.role == "user"]
    assert all(m.role != "user" for m in captured.messages)
    assert captured.metadata.total_user_messages == len(captured.user_messages)
    assert captured.metadata.total_checkpoints == summaries


def test_a_snapshot_is_a_copy_not_a_view(manager: SnapshotManager) -> None:
    context = context_of(long_conversation(2))
    snapshot_id = snap(manager, context)
    context.messages.append(SessionMessage.user("after the snapshot"))
    assert len(manager.restore_snapshot(snapshot_id).messages) == 8


def test_layout_and_permissions(manager: SnapshotManager, settings: SnapshotSettings) -> None:
    snapshot_id = snap(manager, context_of(long_conversation(1)))
    folder = settings.data_dir / SID / "snapshots"
    assert (folder / f"snapshot-{snapshot_id}.json").is_file()
    index = orjson.loads((folder / INDEX_FILE).read_bytes())
    assert [entry["id"] for entry in index["snapshots"]] == [snapshot_id]
    assert index["snapshots"][0]["sessionId"] == SID
    assert orjson.loads((settings.data_dir / MAP_FILE).read_bytes())["snapshots"] == {
        snapshot_id: SID
    }
    for path in (folder / f"snapshot-{snapshot_id}.json", folder / INDEX_FILE):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for path in (settings.data_dir, settings.data_dir / SID, folder):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    data = orjson.loads((folder / f"snapshot-{snapshot_id}.json").read_bytes())
    assert {"id", "sessionId", "timestamp", "tokenCount", "summary", "userMessages"} <= set(data)


def test_list_is_newest_first_and_cleanup_keeps_max_count(tmp_path: Path) -> None:
    manager = SnapshotManager(SnapshotSettings(data_dir=tmp_path / "s", max_count=3))
    ids = [snap(manager, context_of(long_conversation(1))) for _ in range(5)]
    listed = manager.list_snapshots(SID)
    assert [info.id for info in listed] == ids[::-1][:3]
    for removed in ids[:2]:
        assert not (tmp_path / "s" / SID / "snapshots" / f"snapshot-{removed}.json").exists()
        with pytest.raises(SnapshotNotFoundError):
            manager.get_snapshot(removed)
    mapping = orjson.loads((tmp_path / "s" / MAP_FILE).read_bytes())["snapshots"]
    assert sorted(mapping) == sorted(ids[2:])


def test_snapshots_of_sessions_are_kept_apart(manager: SnapshotManager) -> None:
    mine = snap(manager, context_of(long_conversation(1)))
    theirs = snap(manager, context_of(long_conversation(2)), OTHER)
    assert [i.id for i in manager.list_snapshots(SID)] == [mine]
    assert [i.id for i in manager.list_snapshots(OTHER)] == [theirs]
    assert manager.resolve_id(theirs) == (theirs, OTHER)
    assert manager.list_snapshots("770e8400-e29b-41d4-a716-446655440002") == []


# -- ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["", "abc", "../../etc/passwd", "zzzzzz", "abcd/ef", "a" * 33, "12 34", "ab\x00cd"]
)
def test_snapshot_ids_are_checked_before_they_name_a_file(
    manager: SnapshotManager, text: str
) -> None:
    with pytest.raises(InvalidSnapshotIdError) as caught:
        manager.restore_snapshot(text)
    assert caught.value.hint and "snapshots list" in caught.value.hint
    assert caught.value.exit_code == 4


def test_normalize_snapshot_id_accepts_what_users_type() -> None:
    assert normalize_snapshot_id(" ABCDEF12 ") == "abcdef12"
    assert normalize_snapshot_id("snapshot-abcdef123456") == "abcdef123456"


def test_a_unique_prefix_is_enough_and_an_ambiguous_one_is_refused(
    settings: SnapshotSettings,
) -> None:
    manager = FixedIds(settings, ["abcd00000001", "abcd00000002", "ffff00000003"])
    for _ in range(3):
        snap(manager, context_of(long_conversation(1)))
    assert manager.resolve_id("ffff") == ("ffff00000003", SID)
    assert manager.resolve_id("abcd00000001") == ("abcd00000001", SID)
    with pytest.raises(AmbiguousSnapshotIdError, match="2 snapshots"):
        manager.resolve_id("abcd")
    with pytest.raises(SnapshotNotFoundError):
        manager.resolve_id("0123")


def test_session_ids_are_checked_before_they_name_a_folder(manager: SnapshotManager) -> None:
    for bad in ("../x", SID.upper(), "not-a-uuid", SID + "/.."):
        with pytest.raises(InvalidSessionIdError):
            manager.list_snapshots(bad)
        with pytest.raises(InvalidSessionIdError):
            snap(manager, context_of([]), bad)


# -- deleting --------------------------------------------------------------------------


def test_delete_one_snapshot(manager: SnapshotManager, settings: SnapshotSettings) -> None:
    keep = snap(manager, context_of(long_conversation(1)))
    gone = snap(manager, context_of(long_conversation(1)))
    assert manager.delete_snapshot(gone[:6]) == gone
    assert [i.id for i in manager.list_snapshots(SID)] == [keep]
    assert not (settings.data_dir / SID / "snapshots" / f"snapshot-{gone}.json").exists()
    with pytest.raises(SnapshotNotFoundError):
        manager.delete_snapshot(gone)


def test_delete_all_snapshots_of_a_session(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    for _ in range(2):
        snap(manager, context_of(long_conversation(1)))
    other = snap(manager, context_of(long_conversation(1)), OTHER)
    manager.set_active_override(SID, context_of(long_conversation(1)))
    assert manager.delete_session_snapshots(SID) == 2
    assert not (settings.data_dir / SID).exists()
    assert manager.list_snapshots(SID) == []
    assert manager.take_active_override(SID) is None
    assert manager.resolve_id(other) == (other, OTHER)
    mapping = orjson.loads((settings.data_dir / MAP_FILE).read_bytes())["snapshots"]
    assert mapping == {other: OTHER}
    assert manager.delete_session_snapshots(SID) == 0


def test_deleting_a_session_in_the_store_deletes_its_snapshots(
    manager: SnapshotManager, settings: SnapshotSettings, tmp_path: Path
) -> None:
    store_settings = SessionSettings(data_dir=tmp_path / "sessions", group_commit_ms=0)
    with ChatRecordingService(store_settings, snapshots_dir=settings.data_dir) as store:
        sid = store.create_session("m", "p")
        snapshot_id = snap(manager, context_of(long_conversation(1)), sid)
        kept = snap(manager, context_of(long_conversation(1)), OTHER)
        store.close_session(sid)
        store.delete_session(sid)
    assert manager.list_snapshots(sid) == []
    with pytest.raises(SnapshotNotFoundError):
        manager.restore_snapshot(snapshot_id)
    # The next write forgets the deleted session's entries in the map.
    snap(manager, context_of(long_conversation(1)), OTHER)
    mapping = orjson.loads((settings.data_dir / MAP_FILE).read_bytes())["snapshots"]
    assert snapshot_id not in mapping and kept in mapping


# -- damaged files ---------------------------------------------------------------------


def test_a_damaged_index_is_rebuilt_from_the_snapshot_files(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    first = snap(manager, context_of(long_conversation(1)))
    second = snap(manager, context_of(long_conversation(2)))
    index = settings.data_dir / SID / "snapshots" / INDEX_FILE
    index.write_text("[broken")
    assert [i.id for i in manager.list_snapshots(SID)] == [second, first]
    index.unlink()
    assert [i.id for i in manager.list_snapshots(SID)] == [second, first]


def test_a_damaged_or_missing_map_is_rebuilt_from_the_indexes(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    mine = snap(manager, context_of(long_conversation(1)))
    theirs = snap(manager, context_of(long_conversation(1)), OTHER)
    (settings.data_dir / MAP_FILE).write_text("{}}")
    assert manager.resolve_id(mine) == (mine, SID)
    (settings.data_dir / MAP_FILE).unlink()
    assert manager.resolve_id(theirs) == (theirs, OTHER)
    (settings.data_dir / "not-a-session").mkdir()
    assert manager.resolve_id(theirs) == (theirs, OTHER)


def test_a_damaged_snapshot_file_is_an_error_that_says_what_to_do(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    snapshot_id = snap(manager, context_of(long_conversation(1)))
    path = settings.data_dir / SID / "snapshots" / f"snapshot-{snapshot_id}.json"
    path.write_text('{"id": 3')
    with pytest.raises(SnapshotError) as caught:
        manager.restore_snapshot(snapshot_id)
    assert "damaged" in caught.value.message
    assert caught.value.hint and f"snapshots delete {snapshot_id}" in caught.value.hint
    # The index is rebuilt without it if the index is lost too.
    (settings.data_dir / SID / "snapshots" / INDEX_FILE).unlink()
    assert manager.list_snapshots(SID) == []
    assert manager.delete_snapshot(snapshot_id) == snapshot_id


def test_a_snapshot_whose_positions_do_not_match_is_refused(manager: SnapshotManager) -> None:
    snapshot = ContextSnapshot.capture(
        "abcdef123456",
        SID,
        context_of(long_conversation(1)),
        token_count=1,
        summary="",
        reason="auto",
    )
    broken = snapshot.model_copy(update={"user_positions": [99]})
    with pytest.raises(SnapshotError, match="inconsistent"):
        broken.to_context()
    assert snapshot.to_context() == context_of(long_conversation(1)).model_copy(
        update={"messages": snapshot.to_context().messages}
    )


# -- the restore override --------------------------------------------------------------


def test_the_restore_override_is_taken_once(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    context = context_of(long_conversation(2), summaries=1)
    path = manager.set_active_override(SID, context)
    assert path == settings.data_dir / SID / OVERRIDE_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert manager.take_active_override(SID) == context
    assert manager.take_active_override(SID) is None


def test_a_damaged_override_is_dropped(
    manager: SnapshotManager, settings: SnapshotSettings
) -> None:
    (settings.data_dir / SID).mkdir(parents=True)
    (settings.data_dir / SID / OVERRIDE_FILE).write_text("nope")
    assert manager.take_active_override(SID) is None
    assert not (settings.data_dir / SID / OVERRIDE_FILE).exists()


# -- thresholds ------------------------------------------------------------------------


def test_check_thresholds_at_auto_threshold(tmp_path: Path) -> None:
    manager = SnapshotManager(SnapshotSettings(data_dir=tmp_path, auto_threshold=0.85))
    assert not manager.check_thresholds(849, 1000)
    assert manager.check_thresholds(850, 1000)
    assert not manager.check_thresholds(850, 0)
    # Per session: once per crossing, again after usage fell back.
    assert manager.check_thresholds(900, 1000, session_id=SID)
    assert not manager.check_thresholds(950, 1000, session_id=SID)
    assert not manager.check_thresholds(500, 1000, session_id=SID)
    assert manager.check_thresholds(900, 1000, session_id=SID)


@pytest.mark.parametrize("field", ["enabled", "auto_create"])
def test_check_thresholds_off(tmp_path: Path, field: str) -> None:
    settings = SnapshotSettings.model_validate({"data_dir": tmp_path, field: False})
    assert not SnapshotManager(settings).check_thresholds(1000, 1000)


def test_snapshot_errors_are_session_errors() -> None:
    assert issubclass(SnapshotError, SessionError)
