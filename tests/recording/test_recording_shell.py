"""The recording actor's turn end: autoSave and saveDelayMs."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.records import SessionMessage


def _texts(folder: Path, sid: str) -> list[str]:
    data = orjson.loads((folder / f"{sid}.json").read_bytes())
    return [m["parts"][0]["text"] for m in data["messages"]]


def _shell(tmp_path: Path, **session: object) -> RecordingShell:
    settings = OllmSettings()
    settings.services.session.data_dir = tmp_path / "sessions"
    settings.snapshots.data_dir = tmp_path / "snapshots"
    for key, value in session.items():
        setattr(settings.services.session, key, value)
    return RecordingShell(settings)


def _wait_for_file(folder: Path, sid: str) -> list[str]:
    deadline = time.monotonic() + 10
    while not _texts(folder, sid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _texts(folder, sid)


@pytest.mark.parametrize("delay", [0, 100])
def test_turn_end_saves_after_the_delay(tmp_path: Path, delay: int) -> None:
    shell = _shell(tmp_path, save_delay_ms=delay)
    sid = shell.create_session("m", "p")
    shell.record_message(sid, SessionMessage.user("hello"))
    shell.end_turn(sid, 42)
    assert _wait_for_file(tmp_path / "sessions", sid) == ["hello"]
    data = orjson.loads((tmp_path / "sessions" / f"{sid}.json").read_bytes())
    assert data["metadata"]["tokenCount"] == 42
    shell.close()


def test_an_answer_can_carry_the_turn_end(tmp_path: Path) -> None:
    shell = _shell(tmp_path, save_delay_ms=0)
    sid = shell.create_session("m", "p")
    shell.record_message(sid, SessionMessage.user("hello"))
    answer = SessionMessage.assistant("hi there")
    shell.record_answer(sid, answer, prompt_tokens=5, completion_tokens=2, turn_end_tokens=9)
    assert _wait_for_file(tmp_path / "sessions", sid) == ["hello", "hi there"]
    metadata = shell.get_session(sid).metadata
    assert (metadata.token_count, metadata.prompt_tokens, metadata.completion_tokens) == (9, 5, 2)
    shell.close()


@pytest.mark.parametrize("delay", [0, 50])
def test_without_auto_save_the_file_catches_up_when_closed(tmp_path: Path, delay: int) -> None:
    shell = _shell(tmp_path, auto_save=False, save_delay_ms=delay)
    sid = shell.create_session("m", "p")
    shell.record_message(sid, SessionMessage.user("kept in the journal"))
    shell.end_turn(sid, 7)
    assert not shell.store.save_pending(sid)  # no save waits: the file stays behind until close
    assert _texts(tmp_path / "sessions", sid) == []
    assert [m.text for m in shell.get_session(sid).messages] == ["kept in the journal"]
    shell.close_session(sid)
    assert _texts(tmp_path / "sessions", sid) == ["kept in the journal"]
    shell.close()
