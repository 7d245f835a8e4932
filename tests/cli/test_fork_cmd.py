"""``ollm sessions fork`` and ``rewind``: real sessions, real tool calls on real files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart
from ollm_cli.pipeline.tools import ToolExecutor
from tests.cli.conftest import invoke, run_ollm

Opener = Callable[[], ChatRecordingService]


def _conversation(open_test_store: Opener, workspace: Path) -> str:
    """A session of two turns, each writing ``notes.txt`` through a real write_file call
    that keeps its checkpoint; returns its id."""
    settings = loaded_settings().settings
    executor = ToolExecutor(
        settings.tools,
        workspace=workspace,
        checkpoints=settings.checkpoints,
        checkpoints_root=settings.snapshots.data_dir,
    )
    store = open_test_store()
    try:
        sid = store.create_session("m", "simulated", title="notes")
        for n, text in enumerate(["first draft\n", "second draft\n"], 1):
            store.record_message(sid, SessionMessage.user(f"write draft {n}"))
            call = ToolCallPart(
                id=f"w{n}", name="write_file", args={"path": "notes.txt", "content": text}
            )
            store.record_message(sid, SessionMessage(role="assistant", parts=[call]))
            record = executor.execute(call, {"PATH": os.defpath}, True, session_id=sid)
            assert record.success
            store.record_tool_call(sid, record)
            result = ToolResultPart(tool_call_id=call.id, name=call.name, content="ok")
            store.record_message(sid, SessionMessage(role="tool", parts=[result]))
            store.record_message(sid, SessionMessage.assistant(f"wrote draft {n}"))
        store.close_session(sid)
        return sid
    finally:
        store.close()


def test_fork_prints_the_new_session_and_list_and_view_show_the_family(
    open_test_store: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    sid = _conversation(open_test_store, tmp_path)
    out = invoke("fork", sid[:8], "--at", "4", "--title", "other", "--json")
    assert out.exit_code == 0, out.stderr
    result = orjson.loads(out.stdout)
    fork = result["sessionId"]
    assert result["forkedFrom"] == {"sessionId": sid, "messageIndex": 4}
    assert result["toolCallIds"] == ["w1"]
    listed = {s["sessionId"]: s for s in orjson.loads(invoke("list", "--json").stdout)}
    assert listed[fork]["forkedFrom"] == sid
    assert "fork of " + sid[:8] in invoke("list").stdout
    parent_view = invoke("view", sid).stdout
    assert fork[:8] in parent_view
    assert f"{sid[:8]} at message 4" in invoke("view", fork).stdout


def test_fork_of_an_index_beyond_the_session_is_refused(
    open_test_store: Opener, tmp_path: Path
) -> None:
    sid = _conversation(open_test_store, tmp_path)
    out = invoke("fork", sid, "--at", "99")
    assert out.exit_code == 4
    assert "beyond" in out.stderr and "8 message(s)" in out.stderr
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 1
    out = invoke("fork", "deadbeef")
    assert out.exit_code == 4 and "no session" in out.stderr


def test_rewind_restores_the_files_and_continues_in_a_fork(
    open_test_store: Opener, tmp_path: Path
) -> None:
    sid = _conversation(open_test_store, tmp_path)
    notes = tmp_path / "notes.txt"
    assert notes.read_text() == "second draft\n"
    listing = invoke("rewind", sid)
    assert listing.exit_code == 2
    assert "   4  write draft 2" in listing.stdout
    out = invoke("rewind", sid, "--to", "4", "--json")
    assert out.exit_code == 0, out.stderr
    result = orjson.loads(out.stdout)
    assert notes.read_text() == "first draft\n"
    assert result["files"]["items"] == [{"path": "notes.txt", "action": "restored", "reason": None}]
    assert result["prompt"] == "write draft 2"
    fork = result["fork"]["sessionId"]
    store = open_test_store()
    try:
        assert len(store.get_session(sid).messages) == 8  # the abandoned branch is all there
        assert len(store.get_session(fork).messages) == 4
    finally:
        store.close()
    again = invoke("rewind", fork, "--to", "0")  # the fork carried draft 1's checkpoint
    assert again.exit_code == 0, again.stderr
    assert not notes.exists()
    assert "write draft 1" in again.stdout


def test_rewind_refuses_a_file_the_user_changed_unless_told(
    open_test_store: Opener, tmp_path: Path
) -> None:
    sid = _conversation(open_test_store, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("my own edit\n")
    refused = run_ollm("rewind", sid, "--to", "4")
    assert refused.returncode == 4, refused.stderr
    assert "changed since the tools wrote them: notes.txt" in refused.stderr
    assert "--keep-user-changes" in refused.stderr
    assert notes.read_text() == "my own edit\n"
    assert len(orjson.loads(invoke("list", "--json").stdout)) == 1  # no fork made
    kept = invoke("rewind", sid, "--to", "4", "--keep-user-changes")
    assert kept.exit_code == 0
    assert "skipped" in kept.stdout and notes.read_text() == "my own edit\n"
    over = invoke("rewind", sid, "--to", "4", "--overwrite-user-changes", "--no-files")
    assert over.exit_code == 0 and notes.read_text() == "my own edit\n"
    files = invoke("rewind", sid, "--to", "4", "--overwrite-user-changes", "--files-only")
    assert files.exit_code == 0 and notes.read_text() == "first draft\n"
    assert "continues" not in files.stdout


def test_rewind_bad_input(open_test_store: Opener, tmp_path: Path) -> None:
    sid = _conversation(open_test_store, tmp_path)
    out = invoke("rewind", sid, "--to", "9")
    assert out.exit_code == 4 and "beyond" in out.stderr
    out = invoke("rewind", sid, "--to", "4", "--keep-user-changes", "--overwrite-user-changes")
    assert out.exit_code == 2
    assert (tmp_path / "notes.txt").read_text() == "second draft\n"
