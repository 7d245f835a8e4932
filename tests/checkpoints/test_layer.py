"""An overlay's upper folder read and applied, built by hand as overlayfs leaves it:
whiteouts (character devices 0/0), opaque folders (``user.overlay.opaque``), new
and changed files, a FIFO, and a socket that cannot be moved."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from ollm_cli.pipeline.checkpoints._layer import apply_upper, remove_layer, touched
from tests.checkpoints.conftest import tree


@pytest.fixture
def layer(tmp_path: Path) -> tuple[Path, Path]:
    workspace, upper = tmp_path / "ws", tmp_path / "upper"
    (workspace / "old" / "deep").mkdir(parents=True)
    (workspace / "old" / "deep" / "x.txt").write_text("x\n")
    (workspace / "old" / "keep.txt").write_text("keep\n")
    (workspace / "gone.txt").write_text("gone\n")
    (workspace / "same.txt").write_text("same\n")
    (workspace / ".git").mkdir()
    upper.mkdir()
    try:
        os.mknod(upper / "gone.txt", stat.S_IFCHR | 0o000, os.makedev(0, 0))
    except PermissionError:
        pytest.skip("making a whiteout needs CAP_MKNOD")
    (upper / "old").mkdir()
    os.setxattr(upper / "old", "user.overlay.opaque", b"y")
    (upper / "old" / "new.txt").write_text("new\n")
    (upper / "made").mkdir()
    (upper / "made" / "f.txt").write_text("f\n")
    (upper / ".git").mkdir()
    (upper / ".git" / "config").write_text("[core]\n")
    os.mkfifo(upper / "pipe")
    return workspace, upper


def test_touched_names_every_path_the_upper_folder_changes(layer: tuple[Path, Path]) -> None:
    workspace, upper = layer
    assert touched(upper, workspace) == [
        "gone.txt",
        "made",
        "made/f.txt",
        "old",
        "old/deep",
        "old/deep/x.txt",
        "old/keep.txt",
        "old/new.txt",
        "pipe",
    ]


def test_applying_it_makes_the_workspace_what_the_command_saw(layer: tuple[Path, Path]) -> None:
    workspace, upper = layer
    assert apply_upper(upper, workspace) == []
    assert stat.S_ISFIFO(os.lstat(workspace / "pipe").st_mode)
    (workspace / "pipe").unlink()  # reading it would wait for a writer
    assert tree(workspace) == {
        ".git": "/",
        ".git/config": b"[core]\n",  # applied: the control-path guard looks at it next
        "made": "/",
        "made/f.txt": b"f\n",
        "old": "/",
        "old/new.txt": b"new\n",
        "same.txt": b"same\n",
    }
    remove_layer(upper)
    assert not upper.exists()


def test_a_socket_is_named_and_left_in_the_upper_folder(tmp_path: Path) -> None:
    workspace, upper = tmp_path / "ws", tmp_path / "u"
    workspace.mkdir()
    upper.mkdir()
    (upper / "ok.txt").write_text("ok\n")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(upper / "sock"))
        failed = apply_upper(upper, workspace)
    assert [path for path, _ in failed] == ["sock"]
    assert (workspace / "ok.txt").read_text() == "ok\n"
    assert (upper / "sock").exists()
