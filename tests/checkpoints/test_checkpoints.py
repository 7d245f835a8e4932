"""Workspace checkpoints: real tools (bubblewrap shell included) change real files,
and a rewind puts back exactly what they changed."""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ollm_cli.config.settings import CheckpointSettings
from ollm_cli.pipeline.checkpoints import (
    RewindConflict,
    WorkspaceCheckpoints,
    apply_rewind,
    plan_rewind,
)
from ollm_cli.pipeline.errors import CheckpointError
from tests.checkpoints.conftest import SID, Tools, tree


def rewind(tools: Tools, after: int, **kwargs: object) -> list[tuple[str, str]]:
    """Undo the tool calls after the first ``after``; (path, action) pairs."""
    checkpoints = tools.checkpoints
    plan = plan_rewind(checkpoints.changes(), set(tools.ids[after:]))
    report = apply_rewind(plan, checkpoints.blobs, **kwargs)  # type: ignore[arg-type]
    return [(i.path, i.action) for i in report.items]


def test_write_and_edit_are_undone_and_untouched_files_stay(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "keep.txt").write_text("the user's own file\n")
    (ws / "a.txt").write_text("one\n")
    tools.run("write_file", path="a.txt", content="two\n")
    start = tree(ws)
    tools.run("edit_file", path="a.txt", old_string="two", new_string="three")
    tools.run("write_file", path="new/deep/b.txt", content="created\n")
    (ws / "keep.txt").write_text("the user changed it meanwhile\n")
    done = rewind(tools, 1)
    assert tree(ws) == {**start, "keep.txt": b"the user changed it meanwhile\n"}
    assert ("a.txt", "restored") in done and ("new/deep/b.txt", "deleted") in done
    assert ("new", "removed folder") in done


def test_shell_creates_edits_renames_and_deletes_and_all_is_undone(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('hi')\n")
    (ws / "old.txt").write_text("to be renamed\n")
    (ws / "gone.txt").write_text("to be deleted\n")
    os.symlink("src/main.py", ws / "link")
    start = tree(ws)
    tools.run(
        "shell",
        command="echo more >> src/main.py && mv old.txt renamed.txt && rm gone.txt "
        "&& mkdir -p out/x && echo built > out/x/bin && ln -sfn old.txt link",
    )
    assert tree(ws) != start
    rewind(tools, 0)
    assert tree(ws) == start


def test_a_file_changed_by_the_user_since_is_a_conflict(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("one\n")
    tools.run("shell", command="echo tool >> a.txt; echo tool >> b.txt")
    (ws / "a.txt").write_text("user\n")
    with pytest.raises(RewindConflict, match=r"a\.txt"):
        rewind(tools, 0)
    assert (ws / "b.txt").read_text() == "one\ntool\n"  # refused: nothing restored
    done = rewind(tools, 0, on_conflict="keep")
    assert (ws / "a.txt").read_text() == "user\n" and (ws / "b.txt").read_text() == "one\n"
    assert ("a.txt", "skipped") in done
    (ws / "b.txt").write_text("one\ntool\n")
    (ws / "a.txt").write_text("user again\n")


def test_overwrite_restores_a_file_the_user_changed(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "a.txt").write_text("one\n")
    tools.run("write_file", path="a.txt", content="tool\n")
    (ws / "a.txt").write_text("user\n")
    rewind(tools, 0, on_conflict="overwrite")
    assert (ws / "a.txt").read_text() == "one\n"


def test_read_only_tools_keep_nothing(tools: Tools) -> None:
    (tools.workspace / "a.txt").write_text("x\n")
    tools.run("read_file", path="a.txt")
    tools.run("grep", pattern="x")
    assert tools.checkpoints.changes() == []
    assert not tools.checkpoints.folder.exists()


def test_a_damaged_store_is_an_error_before_anything_changes(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("bee\n")
    tools.run("shell", command="echo x > a.txt; echo y > b.txt")
    checkpoints = tools.checkpoints
    digest = next(c.before.digest for c in tools.file_changes if c.path == "b.txt")
    assert digest is not None
    checkpoints.blobs.path(digest).write_bytes(zlib.compress(b"not what it was\n"))
    with pytest.raises(CheckpointError, match="damaged"):
        rewind(tools, 0)
    assert (ws / "a.txt").read_text() == "x\n" and (ws / "b.txt").read_text() == "y\n"


def test_a_workspace_that_moved_is_refused_until_its_place_is_given(
    tools: Tools, tmp_path: Path
) -> None:
    ws = tools.workspace
    (ws / "a.txt").write_text("one\n")
    tools.run("write_file", path="a.txt", content="two\n")
    moved = tmp_path / "moved"
    ws.rename(moved)
    with pytest.raises(CheckpointError, match="not there any more"):
        rewind(tools, 0)
    rewind(tools, 0, workspace=moved)  # its new place given
    assert (moved / "a.txt").read_text() == "one\n"


def test_storage_of_100_edits_of_a_100_kb_file_stays_small(tools: Tools) -> None:
    rng = random.Random(25)  # source-like text that zlib alone shrinks only ~2x
    words = [
        "".join(rng.choice("abcdefghij_klmnopqrstuvwxyz") for _ in range(6)) for _ in range(800)
    ]
    lines = [" ".join(rng.choice(words) for _ in range(7)) + "\n" for _ in range(2200)]
    for n in range(100):
        lines[rng.randrange(len(lines))] = f"edited {n}\n"
        tools.run("write_file", path="big.txt", content="".join(lines))
    assert len(zlib.compress("".join(lines).encode(), 1)) > 35_000  # 100 copies: > 3.5 MB
    assert len("".join(lines)) > 100_000
    used = tools.checkpoints.budget.used  # allocated blocks: each blob takes at least one
    assert used < 2 * 1024 * 1024, used  # issue 25's target
    blobs = tools.checkpoints.blobs
    for change in tools.file_changes[-3:]:  # chunked contents come back whole
        assert change.after.digest is not None
        assert blobs.get(change.after.digest).decode().count("\n") == len(lines)


@pytest.mark.parametrize("checkpoint_settings", [CheckpointSettings(max_mb=1)])
def test_beyond_max_mb_the_change_is_named_not_restored(tools: Tools) -> None:
    ws = tools.workspace
    (ws / "big.bin").write_bytes(os.urandom(1536 * 1024))
    tools.run("shell", command="echo x > big.bin")
    done = rewind(tools, 0)
    assert done == [("big.bin", "skipped")]
    assert (ws / "big.bin").read_text() == "x\n"


@pytest.mark.parametrize("size", [40 * 1024, 200 * 1024])
def test_a_large_file_of_one_line_comes_back_whole(tools: Tools, size: int) -> None:
    """Minified code, no line break: 40 KB is one chunk (kept whole, not as a recipe
    naming itself), 200 KB is cut within the line; both come back as they were."""
    ws = tools.workspace
    rng = random.Random(size)
    data = bytes(rng.choice(b"abcdefgh;{}()=") for _ in range(size))
    (ws / "app.min.js").write_bytes(data)
    tools.run("write_file", path="app.min.js", content="replaced\n")
    rewind(tools, 0)
    assert (ws / "app.min.js").read_bytes() == data


def test_a_fork_carries_the_kept_calls_checkpoints(tools: Tools, tmp_path: Path) -> None:
    ws = tools.workspace
    tools.run("write_file", path="a.txt", content="one\n")
    tools.run("write_file", path="a.txt", content="two\n")
    child = WorkspaceCheckpoints.of_session(
        tmp_path / "snapshots", "0f0e0d0c-0b0a-4000-8000-000000000002", CheckpointSettings()
    )
    assert tools.checkpoints.carry_over(child, {tools.ids[0]}) == 1
    assert [c.tool_call_id for c in child.changes()] == [tools.ids[0]]
    tools.run("write_file", path="a.txt", content="three\n")  # untouched by the fork
    apply_rewind(plan_rewind(child.changes(), {tools.ids[0]}), child.blobs, on_conflict="overwrite")
    assert not (ws / "a.txt").exists()


_names = st.sampled_from(["a.txt", "b.txt", "d/c.txt", "d/e/f.txt"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), _names, st.text(max_size=30)),
        st.tuples(st.just("empty"), _names, st.just("")),
        st.tuples(st.just("copy"), _names, _names),
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_ops, cut=st.integers(0, 6))
def test_property_rewind_then_rerun_reproduces_the_same_files(
    tools: Tools, ops: list[tuple[str, str, str]], cut: int
) -> None:
    """Files created, overwritten and emptied by write_file calls, rewound to a point,
    then the same calls run again: the workspace ends as it was the first time
    (deletes, renames and symlinks by shell are the other tests')."""
    ws = tools.workspace
    for path in sorted(ws.iterdir()):
        _clear(path)
    first = len(tools.ids)

    def run(op: tuple[str, str, str]) -> None:
        kind, name, arg = op
        if kind == "write":
            tools.run("write_file", path=name, content=arg)
        elif kind == "empty":
            tools.run("write_file", path=name, content="")
        else:
            tools.run("write_file", path=arg, content=f"moved from {name}")

    for op in ops:
        run(op)
    end = tree(ws)
    at = first + min(cut, len(ops))
    apply_rewind(
        plan_rewind(tools.checkpoints.changes(), set(tools.ids[at:])),
        tools.checkpoints.blobs,
        on_conflict="refuse",
    )
    for op in ops[min(cut, len(ops)) :]:
        run(op)
    assert tree(ws) == end


def _clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for sub in path.iterdir():
            _clear(sub)
        path.rmdir()
    else:
        path.unlink()


def test_checkpoints_go_to_the_trash_with_their_session_and_are_deleted_with_it(
    tools: Tools, tmp_path: Path
) -> None:
    from ollm_cli.config.settings import SessionSettings
    from ollm_cli.pipeline.recording import ChatRecordingService

    root = tmp_path / "snapshots"
    store = ChatRecordingService(
        SessionSettings(data_dir=tmp_path / "sessions", max_sessions=0), snapshots_dir=root
    )
    try:
        sid = store.create_session("m", "simulated", session_id=SID)
        store.close_session(sid)
        (tools.workspace / "a.txt").write_text("one\n")
        tools.run("write_file", path="a.txt", content="two\n")
        folder = tools.checkpoints.folder
        assert folder == root / SID / "workspace" and folder.is_dir()
        store.trash_session(sid)
        assert not folder.exists()
        store.restore_from_trash(sid)
        assert [c.path for c in tools.checkpoints.changes()] == ["a.txt"]
        store.delete_session(sid)
        assert not (root / SID).exists()
    finally:
        store.close()
