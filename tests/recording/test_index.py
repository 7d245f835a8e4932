"""The session index on its own: staleness, damage, fallbacks, search paging."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.pipeline.recording._document import SessionDocument, new_epoch
from ollm_cli.pipeline.recording._index import (
    SessionIndex,
    SessionView,
    file_sig,
    fts_query,
    message_text,
    tool_call_text,
)
from ollm_cli.pipeline.records import SessionMessage, now_iso


def _write(folder: Path, texts: list[str], **fields: object) -> str:
    sid = str(uuid.uuid4())
    now = now_iso()
    data = {
        "sessionId": sid,
        "startTime": now,
        "lastActivity": now,
        "model": "m",
        "provider": "p",
        "messages": [SessionMessage.user(t).to_dict() for t in texts],
        "toolCalls": [],
        "metadata": {},
        **fields,
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{sid}.json").write_bytes(SessionDocument(data, new_epoch(), 0).encode())
    return sid


def test_an_index_of_a_missing_folder_is_empty(tmp_path: Path) -> None:
    index = SessionIndex(tmp_path / "sessions")
    index.refresh()
    assert index.count() == 0 and index.list_sessions() == []
    index.close()


def test_an_index_of_another_schema_version_is_rebuilt(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["hello"])
    index = SessionIndex(folder)
    index.refresh()
    index._conn.execute("UPDATE meta SET value='0' WHERE key='schema'")
    index.close()
    again = SessionIndex(folder)
    assert again.count() == 0  # dropped...
    again.refresh()
    assert [s.session_id for s in again.list_sessions()] == [sid]  # ...and read again
    again.close()


def test_an_index_folder_that_cannot_exist_is_kept_in_memory(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["hello"])
    (folder / ".index").write_text("a file where the folder should be")
    index = SessionIndex(folder)
    assert index.in_memory
    index.refresh()
    assert [s.session_id for s in index.list_sessions()] == [sid]
    index.close()


def test_a_failing_database_falls_back_to_memory_everywhere(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["hello world"])
    for action in ("refresh", "update", "remove", "rebuild"):
        index = SessionIndex(folder)
        index.refresh()
        index._conn.close()  # the database stops working under the index
        doc = SessionDocument.decode((folder / f"{sid}.json").read_bytes())
        if action == "refresh":
            index.refresh(force=True)
        elif action == "update":
            index.update(sid, SessionView(doc), file_sig(folder / f"{sid}.json"))
        elif action == "remove":
            index.remove(sid)
            index.refresh(force=True)
        else:
            assert index.rebuild() == 1
        assert index.in_memory, action
        assert [s.session_id for s in index.list_sessions()] == [sid], action
        assert index.search("hello")[0].session_id == sid
        index.close()


def test_updates_index_only_new_items_and_start_over_when_the_file_shrank(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["one", "two"])
    index = SessionIndex(folder)
    index.refresh()
    path = folder / f"{sid}.json"
    doc = SessionDocument.decode(path.read_bytes())
    doc.apply({"m": SessionMessage.user("three").to_dict()})
    index.update(sid, SessionView(doc), None)
    assert index.list_sessions()[0].message_count == 3
    assert index.search("three")[0].index == 2
    shorter = SessionDocument.decode(path.read_bytes())
    shorter.messages.pop()
    index.update(sid, SessionView(shorter), None)
    assert index.list_sessions()[0].message_count == 1
    assert index.search("two") == [] and index.search("three") == []
    index.refresh()  # the row had no file signature: read again from the file
    assert index.list_sessions()[0].message_count == 2
    index.close()


def test_odd_entries_in_the_folder_are_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["real"])
    (folder / f"{uuid.uuid4()}.json").mkdir()  # a folder with a session's name
    os.symlink(folder / "nowhere", folder / f"{uuid.uuid4()}.json")  # a dangling link
    index = SessionIndex(folder)
    index.refresh()
    assert [s.session_id for s in index.list_sessions()] == [sid]
    vanished = str(uuid.uuid4())
    index._apply_changes([vanished], [], {vanished: (1, 1, 1)})  # deleted meanwhile
    assert index.count() == 1
    index.close()


def test_search_pages_through_many_hits_of_one_session(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    busy = _write(folder, [f"needle number {n}" for n in range(40)])
    quiet = _write(folder, ["a needle once, among many other words that dilute it"])
    index = SessionIndex(folder)
    index.refresh()
    hits = index.search("needle", limit=2)
    assert [h.session_id for h in hits] == [busy, quiet]
    index.close()


def test_query_building_and_text_extraction() -> None:
    assert fts_query('say "hi" dock*') == '("say" OR "say"*) AND "hi" AND "dock"*'
    assert fts_query("*** ()") is None
    message = {
        "parts": [
            "not a part",
            {"type": "text", "text": "words"},
            {"type": "tool_call", "name": "grep", "args": {"q": "x"}},
            {"type": "tool_result", "name": "grep", "content": "found"},
            {"type": "image", "path": "a.png"},
        ]
    }
    assert message_text(message) == 'words\ngrep\n{"q":"x"}\ngrep\nfound'
    assert message_text({"parts": "odd"}) == ""
    call = {"name": "shell", "args": {}, "result": "odd", "error": "boom"}
    assert tool_call_text(call) == "shell\nboom"
    assert file_sig(Path("/nonexistent/file")) is None


def test_list_is_served_from_the_index_without_reading_files(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    sid = _write(folder, ["x"])
    index = SessionIndex(folder)
    index.refresh()
    old = os.stat(folder).st_mtime_ns - 10**10
    os.utime(folder, ns=(old, old))  # a folder untouched for a while
    index.refresh()  # records the folder's signature as trustworthy
    path = folder / f"{sid}.json"
    data = orjson.loads(path.read_bytes())
    data["model"] = "changed in place"
    path.write_bytes(orjson.dumps(data))
    os.utime(folder, ns=(old, old))
    index.refresh()
    assert index.list_sessions()[0].model == "m"  # nothing re-read: the folder is unchanged
    index.refresh(force=True)
    assert index.list_sessions()[0].model == "changed in place"
    with pytest.raises(sqlite3.ProgrammingError):
        index.close()
        index._conn.execute("SELECT 1")


def test_a_listing_filters_by_folder_and_message_count(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    short = _write(folder, ["one"], metadata={"workingDir": "/src/app"})
    long = _write(folder, ["one", "two", "three"], metadata={"workingDir": "/src/app"})
    elsewhere = _write(folder, ["one", "two", "three"], metadata={"workingDir": "/tmp"})
    index = SessionIndex(folder)
    try:
        index.refresh()

        def ids(**filters: Any) -> set[str]:
            return {s.session_id for s in index.list_sessions(**filters)}

        assert ids(working_dir="/src/app") == {short, long}
        assert ids(min_messages=2) == {long, elsewhere}
        assert ids(working_dir="/src/app", min_messages=2) == {long}
        assert ids(working_dir="/nowhere") == set()
    finally:
        index.close()
