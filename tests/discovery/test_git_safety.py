"""git never runs what a repository's own configuration names (issue 27).

A nested ``sub/.git/config`` can be written by an approved shell call, or come in
an extracted tarball with no tool at all. Each attack below is that file with a
key that makes git run a command (``touch MARKER``); ``ollm files``, the
``list_files``, ``glob`` and ``grep`` tools and the service itself then read that
repository with real git, and MARKER must never appear.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ollm_cli.cli.files_cmd import app
from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.discovery import DiscoveryOptions, FileDiscoveryService, _git
from ollm_cli.pipeline.discovery._git import git_environment, read_git
from ollm_cli.pipeline.discovery._ignore_rules import find_repository
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools._search import (
    GlobArgs,
    GlobTool,
    GrepArgs,
    GrepTool,
    ListFilesArgs,
    ListFilesTool,
)
from tests.discovery.git_classes import git_environment as outside_git_config
from tests.discovery.trees import build, git, git_init

HOOKS = ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "pre-push")


def _touch(marker: Path) -> str:
    return f"touch {marker}; :"


def plant(repo: Path, marker: Path) -> None:
    """Turn ``repo``'s own config into one that runs ``touch MARKER`` every way it can."""
    hooks = repo / ".git" / "evil-hooks"
    hooks.mkdir()
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    command = _touch(marker)
    for key, value in (
        ("core.fsmonitor", command),
        ("core.hooksPath", str(hooks)),
        ("alias.ls-files", f"!{command}"),
        ("alias.config", f"!{command}"),
        ("diff.external", command),
        ("core.pager", command),
        ("pager.ls-files", command),
        ("pager.config", command),
        ("core.editor", command),
        ("core.askPass", command),
        ("core.sshCommand", command),
        ("credential.helper", f"!{command}"),
    ):
        git(repo, "config", key, value)


@pytest.fixture(params=["git reads", "read here"])
def workspace(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A workspace repository with a repository nested three levels down whose config
    was planted after its index was written (so building it ran nothing).

    Twice: once with a split index and ``core.excludesFile`` set in the nested
    repository, so that git itself must read both there (``git ls-files``, ``git
    config``), and once without, so that the scan reads them from the files."""
    root = tmp_path / "workspace"
    build(root, {"README.md": "top\n", "a/b/sub/lib.py": "needle = 1\n", "a/b/sub/.gitignore": ""})
    git_init(root)
    git(root, "add", "README.md")
    nested = root / "a" / "b" / "sub"
    git_init(nested)
    git(nested, "add", "lib.py")
    if request.param == "git reads":
        git(nested, "update-index", "--split-index")
        git(nested, "config", "core.excludesFile", str(tmp_path / "no-such-ignore"))
    plant(nested, tmp_path / "MARKER")
    with outside_git_config(tmp_path):
        yield root


def marker(workspace: Path) -> Path:
    return workspace.parent / "MARKER"


def context(workspace: Path) -> ToolContext:
    sandbox = Sandbox(SandboxSettings(), workspace)
    return ToolContext(workspace=workspace.resolve(), env=dict(os.environ), sandbox=sandbox)


def test_the_planted_config_would_run_under_plain_git(workspace: Path) -> None:
    # the attack is real: git as the old code ran it (cwd in the nested repository)
    git(workspace / "a" / "b" / "sub", "ls-files", "-z", "--cached")
    assert marker(workspace).exists()


@pytest.mark.parametrize("where", ["a/b/sub", "a/b/sub/.", "a"])
def test_ollm_files_runs_nothing_from_a_nested_config(
    workspace: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CliRunner().invoke(app, [str(workspace / where)])
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(workspace / "a" / "b" / "sub")
    assert CliRunner().invoke(app, []).exit_code == 0
    assert not marker(workspace).exists()


def test_the_nested_repository_is_still_read(workspace: Path) -> None:
    nested = workspace / "a" / "b" / "sub"
    (nested / ".gitignore").write_text("*.py\n")
    listed = FileDiscoveryService().scan(DiscoveryOptions(root=nested)).files
    # lib.py is ignored but tracked by the nested index: git lists it, so do we
    assert listed == (".gitignore", "lib.py")
    top = FileDiscoveryService().scan(DiscoveryOptions(root=workspace)).files
    assert top == ("README.md", "a/b/sub/")
    assert not marker(workspace).exists()


def test_search_tools_run_nothing_from_a_nested_config(workspace: Path) -> None:
    ctx = context(workspace)
    for path in (".", "a/b/sub", "a/b"):
        listing = ListFilesTool().run(ListFilesArgs(path=path, depth=5), ctx)
        assert listing.success, listing.llm_content
    assert "a/b/sub/lib.py" in ListFilesTool().run(ListFilesArgs(path="a/b/sub"), ctx).llm_content
    assert GlobTool().run(GlobArgs(pattern="*.py", path="a/b/sub"), ctx).success
    found = GrepTool().run(GrepArgs(pattern="needle", path="a/b/sub"), ctx)
    assert "lib.py:1: needle = 1" in found.llm_content
    assert not marker(workspace).exists()


def test_watching_a_nested_repository_runs_nothing(workspace: Path) -> None:
    service = FileDiscoveryService()
    handle = service.watch_changes(workspace / "a" / "b" / "sub", lambda *_: None)
    handle.dispose()
    assert service.should_ignore(workspace / "a" / "b" / "sub", "lib.py") is False
    assert not marker(workspace).exists()


def test_git_location_and_config_variables_are_not_inherited(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = workspace / "a" / "b" / "sub"
    # our own environment pointing git at the planted repository, or adding config
    monkeypatch.setenv("GIT_DIR", str(nested / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(nested))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", _touch(marker(workspace)))
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", _touch(marker(workspace)))
    view = read_git(str(workspace))
    assert set(view.tracked.files) == {"README.md"}
    repository = find_repository(str(workspace))
    assert repository is not None
    env = git_environment(repository)
    assert env["GIT_DIR"] == str(workspace / ".git")
    assert env["GIT_WORK_TREE"] == str(workspace)
    assert not {"GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF"} & set(env)
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert not marker(workspace).exists()


def test_a_bare_repository_planted_in_the_scanned_folder_is_not_used(workspace: Path) -> None:
    # git's own discovery would take a folder holding HEAD, objects/ and refs/ for
    # a bare repository and read its config; the repository is named instead
    bare = workspace / "a" / "bare"
    git(workspace / "a", "init", "-q", "--bare", "bare")
    git(bare, "config", "core.fsmonitor", _touch(marker(workspace)))
    git(workspace, "add", "a/bare/HEAD")
    view = read_git(str(bare))
    assert "HEAD" in view.tracked
    assert not marker(workspace).exists()


def test_the_excludes_file_of_the_user_still_counts(workspace: Path) -> None:
    home = workspace.parent
    build(home, {".config/git/ignore": "*.swp\n"})
    build(workspace, {"notes.swp": "", "keep.txt": ""})
    files = FileDiscoveryService().scan(DiscoveryOptions(root=workspace)).files
    assert "keep.txt" in files and "notes.swp" not in files
    assert not marker(workspace).exists()


def test_without_git_the_scan_says_so(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(workspace, "update-index", "--split-index")  # an index only git reads
    monkeypatch.setenv("PATH", str(workspace.parent / "no-bin"))
    view = read_git(str(workspace))
    assert view.problem is not None and view.problem.startswith("git is not installed")
    assert view.excludes_file == str(workspace.parent / ".config" / "git" / "ignore")


def test_a_damaged_index_is_a_note_not_a_failure(workspace: Path) -> None:
    (workspace / ".git" / "index").write_bytes(b"DIRC not an index at all")
    result = FileDiscoveryService().scan(DiscoveryOptions(root=workspace))
    assert "README.md" in result.files
    [note] = [note for note in result.notes if note.kind == "git_unavailable"]
    assert note.message.startswith("git could not read the index (")


def test_a_config_that_never_ends_is_cut_by_the_git_time_limit(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an include of a FIFO nobody writes: git blocks reading its configuration
    nested = workspace / "a" / "b" / "sub"
    fifo = workspace.parent / "config-fifo"
    os.mkfifo(fifo)
    git(nested, "config", "include.path", str(fifo))
    monkeypatch.setattr(_git, "GIT_TIMEOUT_S", 0.5)
    view = read_git(str(nested))
    late = "git did not answer within 0.5 s: core.excludesFile was not read"
    if any((nested / ".git").glob("sharedindex.*")):
        # a split index: git had to read it too, and blocked on the same configuration
        assert view.problem == f"{late}; the index neither"
        assert not view.tracked
    else:  # the index was read here, the include never followed
        assert view.problem == late
        assert "lib.py" in view.tracked
    assert not marker(workspace).exists()
