"""Branching.fork: what applies to the kept prefix (snapshots, checkpoints) carries over."""

from __future__ import annotations

from pathlib import Path

from ollm_cli.config.settings import OllmSettings, SessionSettings
from ollm_cli.pipeline.branching import Branching
from ollm_cli.pipeline.compression import SnapshotManager
from ollm_cli.pipeline.compression._active_context import ActiveContext
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage


def test_a_fork_gets_the_snapshots_taken_before_its_cut_only(tmp_path: Path) -> None:
    settings = OllmSettings()
    settings.snapshots.data_dir = tmp_path / "snapshots"
    store = ChatRecordingService(
        SessionSettings(data_dir=tmp_path / "sessions", max_sessions=0),
        snapshots_dir=settings.snapshots.data_dir,
    )
    snapshots = SnapshotManager(settings.snapshots)
    try:
        sid = store.create_session("m", "simulated")
        store.record_message(sid, SessionMessage.user("one"))
        early = ActiveContext(messages=[SessionMessage.user("one")])
        snapshots.create_snapshot(sid, early, token_count=3, summary="early", reason="manual")
        store.record_message(sid, SessionMessage.user("two"))
        late = ActiveContext(messages=[SessionMessage.user("one"), SessionMessage.user("two")])
        snapshots.create_snapshot(sid, late, token_count=6, summary="late", reason="manual")
        branches = Branching(store, settings)
        cut = branches.fork(sid, at=1)
        assert [s.summary for s in snapshots.list_snapshots(cut.session_id)] == ["early"]
        whole = branches.fork(sid)
        assert sorted(s.summary for s in snapshots.list_snapshots(whole.session_id)) == [
            "early",
            "late",
        ]
        restored = snapshots.restore_snapshot(snapshots.list_snapshots(cut.session_id)[0].id)
        assert [m.text for m in restored.messages] == ["one"]
        assert [s.summary for s in snapshots.list_snapshots(sid)] == ["late", "early"]
    finally:
        store.close()
