"""``ollm snapshots list / restore / delete`` through typer's CliRunner."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pytest
from typer.testing import CliRunner, Result

from ollm_cli.cli.exit_codes import exit_code_for
from ollm_cli.cli.snapshots_cmd import app
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.compression import SnapshotManager
from ollm_cli.pipeline.compression._active_context import ActiveContext, checkpoint_message
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import ChatRecordingService
from tests.compression.conversations import SYSTEM_PROMPT, long_conversation


@dataclass
class Outcome:
    exit_code: int
    stdout: str
    stderr: str


def invoke(*args: str, input: str | None = None) -> Outcome:
    """Run the command as ``ollm``'s main would: an OllmError becomes its exit code."""
    result: Result = CliRunner().invoke(app, list(args), input=input)
    if isinstance(result.exception, OllmError):
        return Outcome(exit_code_for(result.exception), result.stdout, str(result.exception))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Outcome(result.exit_code, result.stdout, result.stderr)


@pytest.fixture
def session_id() -> Iterator[str]:
    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    sid = store.create_session("smollm2", "embedded")
    for message in long_conversation(2):
        store.record_message(sid, message)
    store.close()
    yield sid


@pytest.fixture
def manager() -> SnapshotManager:
    return SnapshotManager(loaded_settings().settings.snapshots)


def context() -> ActiveContext:
    return ActiveContext(
        system_prompt=SYSTEM_PROMPT,
        checkpoints=[checkpoint_message("## Goal\nfix the parser")],
        messages=long_conversation(2),
    )


def test_list_shows_snapshots_newest_first(session_id: str, manager: SnapshotManager) -> None:
    first = manager.create_snapshot(
        session_id, context(), token_count=900, summary="before compression", reason="auto"
    )
    second = manager.create_snapshot(
        session_id, context(), token_count=950, summary="by hand", reason="manual"
    )
    out = invoke("list", session_id[:8])
    assert out.exit_code == 0
    assert out.stdout.index(second.id) < out.stdout.index(first.id)
    assert "auto" in out.stdout and "manual" in out.stdout and "950" in out.stdout

    listed = orjson.loads(invoke("list", session_id, "--json").stdout)
    assert [entry["id"] for entry in listed] == [second.id, first.id]
    assert listed[0]["sessionId"] == session_id
    assert listed[0]["tokenCount"] == 950


def test_list_of_a_session_without_snapshots(session_id: str) -> None:
    out = invoke("list", session_id)
    assert out.exit_code == 0
    assert "has no snapshots" in out.stdout
    assert orjson.loads(invoke("list", session_id, "--json").stdout) == []


def test_list_of_an_unknown_or_invalid_session(session_id: str) -> None:
    unknown = invoke("list", "00000000-0000-4000-8000-000000000000")
    assert unknown.exit_code == 4
    assert "no session" in unknown.stderr
    invalid = invoke("list", "../../etc")
    assert invalid.exit_code == 4
    assert "not a session id" in invalid.stderr


def test_restore_writes_the_override_the_session_resumes_from(
    session_id: str, manager: SnapshotManager
) -> None:
    captured = context()
    info = manager.create_snapshot(
        session_id, captured, token_count=900, summary="s", reason="manual"
    )
    out = invoke("restore", info.id[:6])
    assert out.exit_code == 0
    assert f"Restored snapshot {info.id}" in out.stdout
    assert "--resume" in out.stdout
    assert manager.take_active_override(session_id) == captured

    payload = orjson.loads(invoke("restore", info.id, "--json").stdout)
    assert payload["snapshotId"] == info.id
    assert payload["sessionId"] == session_id
    assert payload["messageCount"] == len(captured.messages)
    assert payload["checkpointCount"] == 1
    assert payload["tokenCount"] > 0
    assert manager.take_active_override(session_id) == captured


def test_restore_of_an_unknown_or_invalid_snapshot() -> None:
    assert invoke("restore", "abcdef123456").exit_code == 4
    invalid = invoke("restore", "../../x")
    assert invalid.exit_code == 4
    assert "not a snapshot id" in invalid.stderr


def test_delete_with_yes(session_id: str, manager: SnapshotManager) -> None:
    info = manager.create_snapshot(session_id, context(), token_count=1, summary="", reason="auto")
    out = invoke("delete", info.id, "--yes")
    assert out.exit_code == 0
    assert f"Deleted snapshot {info.id}" in out.stdout
    assert manager.list_snapshots(session_id) == []


def test_delete_without_a_terminal_needs_yes(session_id: str, manager: SnapshotManager) -> None:
    info = manager.create_snapshot(session_id, context(), token_count=1, summary="", reason="auto")
    out = invoke("delete", info.id)
    assert out.exit_code == 2
    assert "--yes" in out.stderr
    assert [i.id for i in manager.list_snapshots(session_id)] == [info.id]


def test_delete_asks_on_a_terminal(
    session_id: str, manager: SnapshotManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = manager.create_snapshot(session_id, context(), token_count=1, summary="", reason="auto")
    monkeypatch.setattr("ollm_cli.cli.snapshots_cmd._stdin_is_terminal", lambda: True)
    declined = invoke("delete", info.id, input="n\n")
    assert declined.exit_code == 1
    assert [i.id for i in manager.list_snapshots(session_id)] == [info.id]
    accepted = invoke("delete", info.id, input="y\n")
    assert accepted.exit_code == 0
    assert manager.list_snapshots(session_id) == []


def test_help_explains_the_commands() -> None:
    out = invoke("--help")
    assert out.exit_code == 0
    for command in ("list", "restore", "delete"):
        assert command in out.stdout
