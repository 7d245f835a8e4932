"""Issue 35, item 9: one rewind restores a folder a tool replaced, with all it held.

A real bubblewrap ``shell`` call replaces a folder by a symlink (leading out of the
workspace, into it, or nowhere), or a symlink by a folder; one rewind, in-process
and as ``ollm sessions rewind`` runs, puts the whole tree back. Where it cannot (a
folder holding files the tools did not make, a folder the user has since made a
symlink), it says so, and writes nothing through a symlink.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.settings import CheckpointSettings, SandboxSettings, ToolSettings
from ollm_cli.pipeline.checkpoints import apply_rewind, plan_rewind
from ollm_cli.pipeline.tools import ToolExecutor
from ollm_cli.pipeline.tools.isolation._overlay import overlay_usable
from tests.checkpoints.conftest import Tools, session_with_a_shell_call, tree
from tests.cli.conftest import run_ollm

WAYS = ["overlay", "stat scan"]


def tools_in(tmp_path: Path, way: str) -> Tools:
    """Tool calls in a workspace with an overlay, or (a ``:`` in its path) without."""
    workspace = tmp_path / ("ws" if way == "overlay" else "ws:scan")
    workspace.mkdir()
    executor = ToolExecutor(
        ToolSettings(sandbox=SandboxSettings(wall_time_s=20, memory_mb=512)),
        workspace=workspace,
        checkpoints=CheckpointSettings(),
        checkpoints_root=tmp_path / "snapshots",
    )
    tools = Tools(executor, workspace.resolve(), {"PATH": os.environ.get("PATH", os.defpath)})
    if way == "overlay" and not overlay_usable(tools.workspace, tools.checkpoints.layers):
        pytest.skip("overlayfs cannot be mounted in a user namespace on this machine")
    return tools


def project(root: Path) -> None:
    """A folder with files and a subfolder, and another folder beside it."""
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "dir" / "f.txt").write_text("f\n")
    (root / "dir" / "sub" / "g.txt").write_text("g\n")
    (root / "other").mkdir()
    (root / "other" / "f.txt").write_text("another f\n")


def rewind_all(tools: Tools, **kwargs: object) -> list[tuple[str, str, str | None]]:
    checkpoints = tools.checkpoints
    plan = plan_rewind(checkpoints.changes(), set(tools.ids))
    report = apply_rewind(plan, checkpoints.blobs, **kwargs)  # type: ignore[arg-type]
    return [(i.path, i.action, i.reason) for i in report.items]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("target", ["../outside", "other", "nowhere"])
def test_one_rewind_restores_a_folder_a_tool_replaced_by_a_symlink(
    tmp_path: Path, way: str, target: str
) -> None:
    tools = tools_in(tmp_path, way)
    outside = tools.workspace.parent / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("outside\n")
    project(tools.workspace)
    start = tree(tools.workspace)
    tools.run("shell", command=f"rm -rf dir && ln -s {target} dir")
    assert os.readlink(tools.workspace / "dir") == target
    done = rewind_all(tools)
    assert tree(tools.workspace) == start
    assert [(path, action) for path, action, _ in done] == [
        ("dir", "created folder"),
        ("dir/f.txt", "restored"),
        ("dir/sub", "created folder"),
        ("dir/sub/g.txt", "restored"),
    ]
    assert (outside / "f.txt").read_text() == "outside\n"  # nothing written through it
    assert tree(outside) == {"f.txt": b"outside\n"}


@pytest.mark.parametrize("way", WAYS)
def test_one_rewind_restores_a_symlink_a_tool_replaced_by_a_folder(
    tmp_path: Path, way: str
) -> None:
    tools = tools_in(tmp_path, way)
    project(tools.workspace)
    os.symlink("other", tools.workspace / "link")
    start = tree(tools.workspace)
    tools.run("shell", command="rm link && mkdir link && echo mine > link/f.txt")
    assert (tools.workspace / "other" / "f.txt").read_text() == "another f\n"
    rewind_all(tools)
    assert tree(tools.workspace) == start


@pytest.mark.parametrize("way", WAYS)
def test_what_one_rewind_cannot_restore_is_said_and_nothing_goes_through_a_symlink(
    tmp_path: Path, way: str
) -> None:
    tools = tools_in(tmp_path, way)
    project(tools.workspace)
    os.symlink("other", tools.workspace / "link")
    tools.run(
        "shell",
        command="echo tool > dir/f.txt && echo new > dir/new.txt"
        " && rm link && mkdir link && echo mine > link/f.txt",
    )
    # since: the user made dir a symlink to other/, and put a file of theirs in link/
    os.rename(tools.workspace / "dir", tools.workspace / "moved")
    os.symlink("other", tools.workspace / "dir")
    (tools.workspace / "link" / "users.txt").write_text("the user's\n")
    other = tree(tools.workspace / "other")
    done = rewind_all(tools, on_conflict="overwrite")
    assert ("link/f.txt", "deleted", None) in done
    assert ("link", "skipped", "folder not empty") in done
    assert (
        "dir/f.txt",
        "skipped",
        "its folder dir is a symlink now, not a folder; left as it is",
    ) in done
    assert tree(tools.workspace / "other") == other  # not a byte through the symlink
    assert (tools.workspace / "link" / "users.txt").read_text() == "the user's\n"
    assert (tools.workspace / "moved" / "new.txt").read_text() == "new\n"


def test_ollm_sessions_rewind_restores_the_folder_in_one_run(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "outside").mkdir()
    project(workspace)
    start = tree(workspace)
    sid = session_with_a_shell_call(workspace, "rm -rf dir && ln -s ../outside dir")
    assert (workspace / "dir").is_symlink()
    out = run_ollm("rewind", sid, "--to", "0", "--files-only", "--json")
    assert out.returncode == 0, out.stderr
    assert tree(workspace) == start
    items = orjson.loads(out.stdout)["files"]["items"]
    assert [i["action"] for i in items] == [
        "created folder",
        "restored",
        "created folder",
        "restored",
    ]
    again = run_ollm("rewind", sid, "--to", "0", "--files-only")
    assert again.returncode == 0, again.stderr
    assert "nothing to restore" in again.stdout  # all of it was back after the first
