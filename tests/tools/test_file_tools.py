"""read_file, write_file, edit_file on real files, and the workspace boundary they keep."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._files import (
    READ_MAX_BYTES,
    READ_MAX_LINES,
    EditFileArgs,
    EditFileTool,
    ReadFileArgs,
    ReadFileTool,
    WriteFileArgs,
    WriteFileTool,
)
from ollm_cli.pipeline.tools._workspace import display_path, resolve_in_workspace


def read(ctx: ToolContext, path: str, **kwargs: int) -> str:
    return ReadFileTool().run(ReadFileArgs(path=path, **kwargs), ctx).llm_content


# -- the workspace boundary ------------------------------------------------------------


@pytest.fixture
def escape_links(workspace: Path, tmp_path: Path) -> Path:
    """A workspace holding symlinks out of it (to a file and a directory) and one inside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret\n")
    (workspace / "inside.txt").write_text("inside\n")
    (workspace / "link_file").symlink_to(outside / "secret.txt")
    (workspace / "link_dir").symlink_to(outside)
    (workspace / "link_etc").symlink_to("/etc")
    (workspace / "link_in").symlink_to(workspace / "inside.txt")
    return outside


@pytest.mark.parametrize(
    "path",
    [
        "../../etc/passwd",
        "/etc/passwd",
        "..",
        "sub/../../x",
        "~/x",
        "link_file",
        "link_dir/secret.txt",
        "link_etc/passwd",
    ],
)
def test_read_file_refuses_paths_outside_the_workspace(
    ctx: ToolContext, escape_links: Path, path: str
) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        ReadFileTool().run(ReadFileArgs(path=path), ctx)


@pytest.mark.parametrize(
    "path", ["link_file", "link_dir/new.txt", "../escape.txt", "/tmp/escape.txt"]
)
def test_write_file_refuses_paths_outside_the_workspace(
    ctx: ToolContext, escape_links: Path, path: str, tmp_path: Path
) -> None:
    with pytest.raises(ToolError, match="outside the workspace"):
        WriteFileTool().run(WriteFileArgs(path=path, content="pwned"), ctx)
    assert (escape_links / "secret.txt").read_text() == "outside secret\n"
    assert not (escape_links / "new.txt").exists()


def test_edit_file_refuses_a_symlink_out_of_the_workspace(
    ctx: ToolContext, escape_links: Path
) -> None:
    args = EditFileArgs(path="link_file", old_string="outside", new_string="changed")
    with pytest.raises(ToolError, match="through a symlink"):
        EditFileTool().run(args, ctx)
    assert (escape_links / "secret.txt").read_text() == "outside secret\n"


def test_symlinks_inside_the_workspace_are_followed(
    ctx: ToolContext, escape_links: Path, workspace: Path
) -> None:
    assert read(ctx, "link_in") == "inside\n"
    WriteFileTool().run(WriteFileArgs(path="link_in", content="rewritten\n"), ctx)
    assert (workspace / "inside.txt").read_text() == "rewritten\n"
    assert (workspace / "link_in").is_symlink()


def test_absolute_paths_inside_the_workspace_are_accepted(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    assert read(ctx, str(workspace / "a.txt")) == "a\n"


@pytest.mark.parametrize("path", ["", "   ", "a\0b"])
def test_empty_or_nul_paths_are_refused(ctx: ToolContext, path: str) -> None:
    with pytest.raises(ToolError):
        resolve_in_workspace(ctx.workspace, path)


segments = st.sampled_from(["..", ".", "a", "b", "link_dir", "link_in", "link_etc", "/", "~"])


@given(parts=st.lists(segments, min_size=1, max_size=6))
def test_resolve_in_workspace_never_returns_a_path_outside(
    parts: list[str], workspace: Path, escape_links: Path
) -> None:
    path = "/".join(parts)
    root = workspace.resolve()
    try:
        resolved = resolve_in_workspace(workspace, path)
    except ToolError as error:
        assert "outside the workspace" in error.message or "empty" in error.message
        return
    assert resolved.is_relative_to(root)
    assert resolved == resolved.resolve()


def test_display_path_is_relative_to_the_workspace(workspace: Path) -> None:
    assert display_path(workspace, workspace.resolve()) == "."
    assert display_path(workspace, workspace.resolve() / "a" / "b.txt") == "a/b.txt"


# -- read_file ----------------------------------------------------------------------------


def test_read_file_returns_the_content_and_a_display_line(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\r\nthree")
    out = ReadFileTool().run(ReadFileArgs(path="notes.txt"), ctx)
    assert out.success and out.llm_content == "one\ntwo\r\nthree"
    assert out.return_display == "Read 3 lines (14 bytes) from notes.txt"


def test_read_file_offset_and_limit(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    out = ReadFileTool().run(ReadFileArgs(path="n.txt", offset=3, limit=2), ctx)
    assert out.llm_content.startswith("line 3\nline 4\n")
    assert "offset=5" in out.llm_content
    assert out.return_display == "Read lines 4-5 of n.txt"
    assert read(ctx, "n.txt", offset=8) == "line 8\nline 9\n"


def test_read_file_offset_past_the_end(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("a\nb\n")
    with pytest.raises(ToolError, match=r"offset 5 is past the end of n.txt \(2 lines\)"):
        ReadFileTool().run(ReadFileArgs(path="n.txt", offset=5), ctx)


def test_read_file_caps_lines_and_bytes(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "many.txt").write_text("x\n" * (READ_MAX_LINES + 50))
    out = ReadFileTool().run(ReadFileArgs(path="many.txt"), ctx)
    assert out.llm_content.count("x\n") == READ_MAX_LINES
    assert f"offset={READ_MAX_LINES}" in out.llm_content
    (workspace / "wide.txt").write_text(("y" * 1000 + "\n") * 400)
    out = ReadFileTool().run(ReadFileArgs(path="wide.txt"), ctx)
    body = out.llm_content.split("\n[")[0]
    assert len(body.encode()) <= READ_MAX_BYTES
    assert "more follow" in out.llm_content


def test_read_file_cuts_one_huge_line(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "huge.txt").write_text("z" * (READ_MAX_BYTES * 2) + "\nnext\n")
    out = ReadFileTool().run(ReadFileArgs(path="huge.txt"), ctx)
    assert out.llm_content.startswith("z" * READ_MAX_BYTES + "\n[line 1 is longer")
    assert "offset=1" in out.llm_content
    assert read(ctx, "huge.txt", offset=1) == "next\n"


def test_read_file_never_holds_a_long_line_whole(ctx: ToolContext, workspace: Path) -> None:
    """A 48 MiB line is cut before it is read: the peak of Python's allocations stays
    a few times the cap, not the line's size (the whole line used to be read first)."""
    line = b"y" * (1024 * 1024)
    with (workspace / "one-line.txt").open("wb") as handle:
        for _ in range(48):
            handle.write(line)
        handle.write(b"\nafter\n")
    tracemalloc.start()
    try:
        out = ReadFileTool().run(ReadFileArgs(path="one-line.txt"), ctx)
        after = ReadFileTool().run(ReadFileArgs(path="one-line.txt", offset=1), ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.llm_content.startswith("y" * READ_MAX_BYTES + "\n[line 1 is longer")
    assert after.llm_content == "after\n"
    assert peak < 8 * READ_MAX_BYTES + 2 * 1024 * 1024


def test_read_file_empty_file(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "empty.txt").write_text("")
    out = ReadFileTool().run(ReadFileArgs(path="empty.txt"), ctx)
    assert out.llm_content == "" and out.return_display == "Read empty.txt (empty)"


def test_read_file_refuses_binary_missing_and_directories(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "blob.bin").write_bytes(b"\x7fELF\0\0\x01")
    (workspace / "dir").mkdir()
    with pytest.raises(ToolError, match="binary file"):
        ReadFileTool().run(ReadFileArgs(path="blob.bin"), ctx)
    with pytest.raises(ToolError, match="does not exist"):
        ReadFileTool().run(ReadFileArgs(path="nope.txt"), ctx)
    with pytest.raises(ToolError, match="not a file"):
        ReadFileTool().run(ReadFileArgs(path="dir"), ctx)


def test_read_file_replaces_undecodable_bytes(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "latin.txt").write_bytes(b"caf\xe9\n")
    assert read(ctx, "latin.txt") == "caf\ufffd\n"


# -- write_file ------------------------------------------------------------------------------


def test_write_file_creates_with_directories(ctx: ToolContext, workspace: Path) -> None:
    out = WriteFileTool().run(WriteFileArgs(path="a/b/c.txt", content="héllo\n"), ctx)
    assert (workspace / "a/b/c.txt").read_text() == "héllo\n"
    assert out.return_display == "Created a/b/c.txt (7 bytes)"
    mode = (workspace / "a/b/c.txt").stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


def test_write_file_overwrites_and_keeps_the_mode(ctx: ToolContext, workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("old\n")
    script.chmod(0o750)
    out = WriteFileTool().run(WriteFileArgs(path="run.sh", content="new\r\n"), ctx)
    assert script.read_bytes() == b"new\r\n"
    assert script.stat().st_mode & 0o777 == 0o750
    assert out.return_display is not None and out.return_display.startswith("Overwrote")
    assert [p.name for p in workspace.iterdir()] == ["run.sh"]  # no temporary left


def test_write_file_refuses_a_directory_or_a_file_as_parent(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "dir").mkdir()
    (workspace / "file").write_text("x")
    with pytest.raises(ToolError, match="is a directory"):
        WriteFileTool().run(WriteFileArgs(path="dir", content="x"), ctx)
    with pytest.raises(ToolError, match="not a directory"):
        WriteFileTool().run(WriteFileArgs(path="file/child.txt", content="x"), ctx)


def test_write_file_failure_leaves_the_old_content(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = workspace / "keep.txt"
    target.write_text("precious\n")

    def broken_replace(src: str, dst: str, **_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        WriteFileTool().run(WriteFileArgs(path="keep.txt", content="new"), ctx)
    assert target.read_text() == "precious\n"
    assert [p.name for p in workspace.iterdir()] == ["keep.txt"]


# -- edit_file -------------------------------------------------------------------------------


def test_edit_file_replaces_a_unique_string(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\ny = 2\r\n")
    args = EditFileArgs(path="a.py", old_string="y = 2", new_string="y = 3\nz = 4")
    out = EditFileTool().run(args, ctx)
    assert (workspace / "a.py").read_bytes() == b"x = 1\ny = 3\nz = 4\r\n"
    assert out.return_display == "Edited a.py (-1 +2 lines)"


def test_edit_file_not_found_and_not_unique(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times") as caught:
        EditFileTool().run(EditFileArgs(path="a.py", old_string="x = 1", new_string="x"), ctx)
    assert caught.value.hint is not None and "unique" in caught.value.hint
    with pytest.raises(ToolError, match="was not found"):
        EditFileTool().run(EditFileArgs(path="a.py", old_string="y", new_string="x"), ctx)
    with pytest.raises(ToolError, match="the same"):
        EditFileTool().run(
            EditFileArgs(path="a.py", old_string="x = 1\nx", new_string="x = 1\nx"), ctx
        )
    assert (workspace / "a.py").read_text() == "x = 1\nx = 1\n"


def test_edit_file_refuses_binary_and_non_utf8(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "b.bin").write_bytes(b"a\0b")
    (workspace / "l.txt").write_bytes(b"caf\xe9")
    with pytest.raises(ToolError, match="binary"):
        EditFileTool().run(EditFileArgs(path="b.bin", old_string="a", new_string="b"), ctx)
    with pytest.raises(ToolError, match="not UTF-8"):
        EditFileTool().run(EditFileArgs(path="l.txt", old_string="caf", new_string="b"), ctx)


@given(
    before=st.text(alphabet="ab\n", max_size=30),
    needle=st.text(alphabet="abc\n", min_size=1, max_size=4),
    replacement=st.text(alphabet="xy\n", max_size=4),
)
def test_edit_file_changes_only_the_unique_match(
    ctx: ToolContext, workspace: Path, before: str, needle: str, replacement: str
) -> None:
    target = workspace / "p.txt"
    target.write_bytes(before.encode())
    args = EditFileArgs(path="p.txt", old_string=needle, new_string=replacement)
    count = before.count(needle)
    if count != 1 or needle == replacement:
        with pytest.raises(ToolError):
            EditFileTool().run(args, ctx)
        assert target.read_bytes().decode() == before
    else:
        EditFileTool().run(args, ctx)
        assert target.read_bytes().decode() == before.replace(needle, replacement)
