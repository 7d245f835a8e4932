"""Session ids, titles and the writer lock's file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.errors import InvalidSessionIdError, SessionLockedError, StorageError
from ollm_cli.pipeline.recording._ids import (
    canonical_id,
    check_prefix,
    matches_prefix,
    new_session_id,
    session_id_of_file,
)
from ollm_cli.pipeline.recording._lock import SessionLock, describe_process, lock_holder
from ollm_cli.pipeline.terminal_text import strip_control
from ollm_cli.pipeline.title_text import clean_title, shorten, title_from_text


@given(st.text(max_size=60))
def test_anything_accepted_as_an_id_or_prefix_is_hex_and_dashes(text: str) -> None:
    try:
        checked = check_prefix(text)
    except InvalidSessionIdError as exc:
        assert exc.hint
        return
    assert set(checked) <= set("0123456789abcdef-") and len(checked) <= 36
    assert "/" not in checked and ".." not in checked


def test_canonical_ids() -> None:
    sid = new_session_id()
    assert canonical_id(sid.upper()) == sid
    assert canonical_id(sid.replace("-", "")) == sid
    with pytest.raises(InvalidSessionIdError, match="not a session id"):
        canonical_id("../../etc/passwd")
    long = "x" * 100
    with pytest.raises(InvalidSessionIdError, match=r"\.\.\."):
        canonical_id(long)
    assert session_id_of_file(f"{sid}.json") == sid
    assert session_id_of_file(f"{sid}.json.corrupt-1") is None
    assert session_id_of_file(f"{'z' * 36}.json") is None
    assert matches_prefix(sid, sid[:8].replace("-", ""))
    assert not matches_prefix(sid, "-")


@given(st.text(max_size=300))
def test_titles_are_one_line_of_at_most_80_characters(text: str) -> None:
    title = title_from_text(text)
    text = strip_control(text)  # control sequences never reach a title
    if title is None:
        assert not text.split()
        return
    assert 0 < len(title) <= 80 and "\n" not in title and title == title.strip()
    first_line = next(line for line in text.splitlines() if line.split())
    words = " ".join(first_line.split())
    assert title == words or (title.endswith("…") and words.startswith(title[:-1].rstrip()))


def test_titles_are_cut_on_a_word_boundary() -> None:
    assert shorten("alpha beta gamma", 12) == "alpha beta…"
    assert shorten("a" * 30, 10) == "a" * 9 + "…"
    assert clean_title("  two\n lines ") == "two lines"
    assert clean_title("x" * 200, 80).endswith("…")


def test_the_lock_names_its_holder_and_is_released(tmp_path: Path) -> None:
    path = tmp_path / "s.lock"
    lock = SessionLock.acquire(path, "s")
    assert lock.held and lock_holder(path) == os.getpid()
    with pytest.raises(SessionLockedError, match=rf"this process \({os.getpid()}\)"):
        SessionLock.acquire(path, "s")
    lock.release()
    lock.release()
    assert not lock.held and not path.exists() and lock_holder(path) is None
    assert describe_process(None) == "another process"
    assert describe_process(1).startswith("process 1")
    assert describe_process(2**22 + 12345) == f"process {2**22 + 12345}"


def test_a_lock_in_a_folder_that_cannot_hold_it_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageError, match="cannot lock session s"):
        SessionLock.acquire(tmp_path / "file" / "s.lock", "s")
