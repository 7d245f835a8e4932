"""list_files, glob and grep through the real FileDiscoveryService on real trees."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import FileDiscoverySettings, SandboxSettings
from ollm_cli.pipeline.discovery import FileDiscoveryService
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools._search import (
    GREP_MAX_FILE_BYTES,
    GREP_MAX_LINE_CHARS,
    MAX_ENTRIES,
    GlobArgs,
    GlobTool,
    GrepArgs,
    GrepTool,
    ListFilesArgs,
    ListFilesTool,
)


@pytest.fixture
def project(workspace: Path, tmp_path: Path) -> Path:
    """A small project with ignored files, a nested package and a binary."""
    files = {
        ".gitignore": "*.log\nsecret/\n",
        "README.md": "# Demo\nTODO: write docs\n",
        "app.log": "TODO in a log\n",
        "secret/keys.txt": "TODO secret\n",
        "node_modules/lib/index.js": "// TODO vendored\n",
        "src/main.py": "def main():\n    return 1  # TODO tidy\n",
        "src/pkg/util.py": "def helper():\n    pass\n",
        "docs/guide.md": "todo lowercase\n",
    }
    for relative, text in files.items():
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (workspace / "image.png").write_bytes(b"\x89PNG\0\0TODO")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "leak.txt").write_text("TODO outside\n")
    (workspace / "link_out").symlink_to(outside / "leak.txt")
    return workspace


def test_list_files_shows_one_level_without_ignored_files(ctx: ToolContext, project: Path) -> None:
    out = ListFilesTool().run(ListFilesArgs(), ctx)
    assert out.llm_content.splitlines() == [
        ".gitignore",
        "README.md",
        "docs/",
        "image.png",
        "link_out@",
        "src/",
    ]
    assert out.return_display == "Listed 6 entries in ."


def test_list_files_deeper_and_in_a_subdirectory(ctx: ToolContext, project: Path) -> None:
    out = ListFilesTool().run(ListFilesArgs(path="src", depth=2), ctx)
    assert out.llm_content.splitlines() == ["src/main.py", "src/pkg/", "src/pkg/util.py"]


def test_list_files_empty_and_bad_directories(
    ctx: ToolContext, project: Path, workspace: Path
) -> None:
    (workspace / "empty").mkdir()
    out = ListFilesTool().run(ListFilesArgs(path="empty"), ctx)
    assert out.return_display == "Listed empty: empty"
    with pytest.raises(ToolError, match="not a directory"):
        ListFilesTool().run(ListFilesArgs(path="README.md"), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        ListFilesTool().run(ListFilesArgs(path="../.."), ctx)


def test_list_files_caps_long_listings(ctx: ToolContext, workspace: Path) -> None:
    for index in range(MAX_ENTRIES + 7):
        (workspace / f"f{index:04}.txt").write_text("")
    out = ListFilesTool().run(ListFilesArgs(), ctx)
    lines = out.llm_content.splitlines()
    assert len(lines) == MAX_ENTRIES + 1
    assert lines[-1] == "[7 more entries not shown]"


def test_glob_matches_with_gitignore_semantics(ctx: ToolContext, project: Path) -> None:
    out = GlobTool().run(GlobArgs(pattern="*.py"), ctx)
    assert out.llm_content.splitlines() == ["src/main.py", "src/pkg/util.py"]
    assert out.return_display == "glob *.py: 2 file(s)"
    out = GlobTool().run(GlobArgs(pattern="*.py", path="src/pkg"), ctx)
    assert out.llm_content == "src/pkg/util.py"
    out = GlobTool().run(GlobArgs(pattern="*.log"), ctx)
    assert out.llm_content == "No file matches '*.log'."


def test_glob_bad_pattern_is_a_clear_error(ctx: ToolContext, project: Path) -> None:
    with pytest.raises(ToolError, match="not a usable glob"):
        GlobTool().run(GlobArgs(pattern="!*.py"), ctx)


def test_grep_finds_lines_and_honours_ignores(ctx: ToolContext, project: Path) -> None:
    out = GrepTool().run(GrepArgs(pattern="TODO"), ctx)
    assert out.llm_content.splitlines() == [
        "README.md:2: TODO: write docs",
        "src/main.py:2:     return 1  # TODO tidy",
    ]
    assert out.return_display == "grep TODO: 2 match(es)"


def test_grep_options(ctx: ToolContext, project: Path) -> None:
    insensitive = GrepTool().run(GrepArgs(pattern="todo", ignore_case=True), ctx)
    assert "docs/guide.md:1: todo lowercase" in insensitive.llm_content.splitlines()
    only_md = GrepTool().run(GrepArgs(pattern="(?i)todo", include="*.md"), ctx)
    assert [line.split(":")[0] for line in only_md.llm_content.splitlines()] == [
        "README.md",
        "docs/guide.md",
    ]
    one_file = GrepTool().run(GrepArgs(pattern=r"def \w+", path="src/pkg/util.py"), ctx)
    assert one_file.llm_content == "src/pkg/util.py:1: def helper():"
    capped = GrepTool().run(GrepArgs(pattern="(?i)todo", max_results=1), ctx)
    assert capped.llm_content.splitlines()[0] == "README.md:2: TODO: write docs"
    assert "stopped at 1 matches" in capped.llm_content


def test_grep_skips_binary_large_and_escaping_files(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "blob.bin").write_bytes(b"needle\0")
    (workspace / "big.txt").write_text("needle\n" + "x" * GREP_MAX_FILE_BYTES)
    outside = tmp_path / "out.txt"
    outside.write_text("needle\n")
    (workspace / "link.txt").symlink_to(outside)
    out = GrepTool().run(GrepArgs(pattern="needle"), ctx)
    assert out.llm_content == "No match for 'needle' (2 binary or large file(s) skipped)."
    with pytest.raises(ToolError, match="through a symlink"):
        GrepTool().run(GrepArgs(pattern="needle", path="link.txt"), ctx)


def test_grep_cuts_long_lines(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "wide.txt").write_text("needle" + "y" * 1000 + "\n")
    out = GrepTool().run(GrepArgs(pattern="needle"), ctx)
    assert out.llm_content == "wide.txt:1: " + ("needle" + "y" * 1000)[:GREP_MAX_LINE_CHARS] + "…"


def test_grep_errors(ctx: ToolContext, project: Path) -> None:
    with pytest.raises(ToolError, match="invalid regular expression"):
        GrepTool().run(GrepArgs(pattern="(unclosed"), ctx)
    with pytest.raises(ToolError, match="does not exist"):
        GrepTool().run(GrepArgs(pattern="x", path="missing"), ctx)
    with pytest.raises(ToolError, match="outside the workspace"):
        GrepTool().run(GrepArgs(pattern="root", path="/etc/passwd"), ctx)


def test_a_pattern_that_backtracks_without_end_is_stopped(
    workspace: Path, plain_env: dict[str, str]
) -> None:
    # (a|aa)+$ against a long run of a's and one b tries every way of cutting
    # the run in ones and twos (exponential): the search gets the wall time
    (workspace / "evil.txt").write_text("a" * 64 + "b\n")
    limits = SandboxSettings(wall_time_s=0.5)
    ctx = ToolContext(
        workspace=workspace.resolve(), env=plain_env, sandbox=Sandbox(limits, workspace)
    )
    with pytest.raises(ToolError, match=r"took longer than 0.5 s \(tools.sandbox.wallTimeS\)"):
        GrepTool().run(GrepArgs(pattern="(a|aa)+$"), ctx)
    assert GrepTool().run(GrepArgs(pattern="a+b$"), ctx).llm_content.startswith("evil.txt:1:")


def test_grep_skips_a_fifo_instead_of_blocking(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("needle\n")
    os.mkfifo(workspace / "pipe")
    out = GrepTool().run(GrepArgs(pattern="needle"), ctx)
    assert out.llm_content == "a.txt:1: needle"
    nothing = GrepTool().run(GrepArgs(pattern="absent"), ctx)
    # file discovery lists no special file (as git does), so the FIFO is never opened
    assert nothing.llm_content == "No match for 'absent'."


def test_grep_vanished_file_is_skipped(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "a.txt").write_text("needle\n")
    real_open = os.open

    def vanished(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("a.txt"):
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", vanished)
    out = GrepTool().run(GrepArgs(pattern="needle"), ctx)
    assert out.llm_content.startswith("No match")


words = st.text(alphabet="abc", min_size=1, max_size=3)


@given(lines=st.lists(words, max_size=15), needle=words)
def test_grep_reports_exactly_the_matching_lines(
    ctx: ToolContext, workspace: Path, lines: list[str], needle: str
) -> None:
    (workspace / "f.txt").write_text("".join(line + "\n" for line in lines))
    out = GrepTool().run(GrepArgs(pattern=needle, path="f.txt", max_results=1000), ctx)
    expected = [f"f.txt:{n}: {line}" for n, line in enumerate(lines, start=1) if needle in line]
    if expected:
        assert out.llm_content.splitlines() == expected
    else:
        assert out.llm_content.startswith("No match")


def test_grep_never_reads_through_a_followed_symlink_out_of_the_workspace(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "leak.txt").write_text("needle outside\n")
    (workspace / "inside.txt").write_text("needle inside\n")
    (workspace / "linked").symlink_to(outside)
    following = FileDiscoveryService(FileDiscoverySettings(follow_symlinks=True))
    ctx = dataclasses.replace(ctx, discovery=following)
    out = GrepTool().run(GrepArgs(pattern="needle"), ctx)
    assert out.llm_content == "inside.txt:1: needle inside"
