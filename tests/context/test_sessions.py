"""Each conversation's context: built from project files, extensions and saved entries."""

from __future__ import annotations

from pathlib import Path

import pytest

from ollm_cli.config.settings import ContextSettings
from ollm_cli.pipeline.context import ContextEntryStore, SessionContexts
from ollm_cli.pipeline.errors import InvalidSessionIdError
from ollm_cli.pipeline.extensions import ExtensionContext

SID = "0b0e5d4c-2f55-4e43-9a53-0c8d6f0e4a11"


def contexts(tmp_path: Path, extensions: list[ExtensionContext] | None = None) -> SessionContexts:
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    (workspace / "OLLM.md").write_text("Always answer in French.")
    store = ContextEntryStore(tmp_path / "sessions" / ".context")
    return SessionContexts(ContextSettings(), workspace, store, extensions or [])


def test_a_new_process_finds_what_the_user_added_but_not_what_expires(tmp_path: Path) -> None:
    first = contexts(tmp_path)
    first.add(SID, "style", "Be brief.", priority=70)
    first.add(SID, "reminder", "The build is red.", source="hook", ttl=60)
    again = contexts(tmp_path)  # a restarted actor or a later command
    keys = [e.key for e in again.entries(SID)]
    assert "style" in keys and "reminder" not in keys
    assert "Always answer in French." in again.additions(SID).text


def test_extension_and_project_entries_are_rebuilt_not_saved(tmp_path: Path) -> None:
    contributed = [ExtensionContext(key="ext:tips", content="Use tabs.", priority=40)]
    first = contexts(tmp_path, contributed)
    first.add(SID, "style", "Be brief.")
    saved = ContextEntryStore(tmp_path / "sessions" / ".context").load(SID)
    assert [e.key for e in saved] == ["style"]
    assert {e.source for e in first.entries(SID)} == {"system", "extension", "user"}


def test_removing_an_entry_is_saved_too(tmp_path: Path) -> None:
    first = contexts(tmp_path)
    first.add(SID, "style", "Be brief.")
    assert first.remove(SID, "style") and not first.remove(SID, "style")
    assert "style" not in [e.key for e in contexts(tmp_path).entries(SID)]


def test_an_unreadable_entries_file_is_reported_and_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = ContextEntryStore(tmp_path / "sessions" / ".context")
    store.folder.mkdir(parents=True)
    store.path(SID).write_text("{not json")
    assert store.load(SID) == []
    assert "unreadable" in caplog.text


def test_a_hostile_session_id_never_names_a_file(tmp_path: Path) -> None:
    store = ContextEntryStore(tmp_path / ".context")
    with pytest.raises(InvalidSessionIdError):
        store.path("../../etc/passwd")
