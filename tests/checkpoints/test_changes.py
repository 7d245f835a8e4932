"""The change log read from where it ended, and the ``changed:`` line of views."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ollm_cli.pipeline.checkpoints import (
    ChangeLog,
    FileChange,
    FileState,
    UnrecordedPaths,
    changed_note,
)

ABSENT_STATE = FileState(kind="absent")


def change(path: str) -> FileChange:
    return FileChange(
        tool_call_id="c", workspace="/w", path=path, before=ABSENT_STATE, after=ABSENT_STATE
    )


def test_the_log_read_since_a_size_gives_only_what_was_appended_after(tmp_path: Path) -> None:
    log = ChangeLog(tmp_path)
    assert log.size() == 0 and log.read(0) == []
    log.append([change("a.txt")])
    mark = log.size()
    log.append([change("b.txt"), change("c/d.txt")])
    assert [c.path for c in log.read(mark)] == ["b.txt", "c/d.txt"]
    assert [c.path for c in log.read()] == ["a.txt", "b.txt", "c/d.txt"]


def test_the_note_names_three_paths_and_counts_the_rest_leaving_out_their_folders() -> None:
    assert changed_note([change("a.py")]) == "changed: a.py"
    paths = ["a.py", "b", "d.txt", "e.txt", "b/c.txt", "a.py"]  # the shallowest first
    assert changed_note([change(p) for p in paths]) == "changed: a.py, b/c.txt, d.txt (+1 more)"


def test_the_paths_a_call_did_not_name_count_in_the_note() -> None:
    counted = UnrecordedPaths(
        tool_call_id="c", workspace="/w", path="d", unrecorded=19_000, reason="too many"
    )
    named = [change(f"d/f{n}") for n in range(5)]
    assert changed_note([*named, counted]) == "changed: d/f0, d/f1, d/f2 (+19,002 more)"
    assert changed_note([counted]) == "changed: 19,000 path(s), not recorded"


_names = st.text(alphabet="abc/", min_size=1, max_size=6).filter(
    lambda p: "//" not in p and not p.startswith("/") and not p.endswith("/")
)


@settings(max_examples=100, deadline=None)
@given(st.lists(_names, min_size=1, max_size=12))
def test_property_the_note_shows_each_listed_path_once_and_counts_all(paths: list[str]) -> None:
    note = changed_note([change(p) for p in paths])
    listed = [p for p in sorted(set(paths)) if not any(q.startswith(p + "/") for q in paths)]
    shown = note.removeprefix("changed: ").split(" (+")[0].split(", ")
    assert shown == listed[:3]
    more = len(listed) - 3
    assert note.endswith(f"(+{more} more)") == (more > 0)
