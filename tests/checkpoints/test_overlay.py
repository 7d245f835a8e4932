"""Shell checkpoints on an overlay: the real bubblewrap shell writes to an overlay's
upper folder, only what it changed is kept, the changes reach the workspace, and a
rewind puts back exactly what was there (folders replaced, files turned into
folders and back, modes), while a workspace where no overlay can be mounted falls
back to the stat scan."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ollm_cli.config.settings import CheckpointSettings, SandboxSettings, ToolSettings
from ollm_cli.pipeline.checkpoints import apply_rewind, plan_rewind
from ollm_cli.pipeline.checkpoints._recorder import BASELINE_FILE
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.tools import ToolExecutor
from ollm_cli.pipeline.tools.isolation._overlay import has_submounts, overlay_usable
from tests.checkpoints.conftest import SID, Tools, tree


def rewind(tools: Tools, after: int) -> list[tuple[str, str]]:
    checkpoints = tools.checkpoints
    plan = plan_rewind(checkpoints.changes(), set(tools.ids[after:]))
    return [(i.path, i.action) for i in apply_rewind(plan, checkpoints.blobs).items]


def modes(root: Path) -> dict[str, int]:
    """The permission bits of everything under ``root`` but symlinks."""
    return {
        str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode)
        for p in sorted(root.rglob("*"))
        if not p.is_symlink()
    }


def blob_count(tools: Tools) -> int:
    return sum(1 for p in tools.checkpoints.blobs.folder.rglob("*") if p.is_file())


@pytest.fixture
def overlaid(tools: Tools) -> Tools:
    if not overlay_usable(tools.workspace, tools.checkpoints.layers):
        pytest.skip("overlayfs cannot be mounted in a user namespace on this machine")
    return tools


def test_a_shell_call_keeps_what_it_changed_not_the_workspace(overlaid: Tools) -> None:
    ws = overlaid.workspace
    for n in range(300):
        (ws / f"f{n:03d}.txt").write_text(f"file {n}\n")
    start = tree(ws)
    overlaid.run("shell", command="echo more >> f007.txt && echo new > created.txt")
    assert (ws / "f007.txt").read_text() == "file 7\nmore\n"
    assert (ws / "created.txt").read_text() == "new\n"
    changes = overlaid.checkpoints.changes()
    assert sorted(c.path for c in changes) == ["created.txt", "f007.txt"]
    # the old and new f007.txt and created.txt: three contents, not 300
    assert blob_count(overlaid) == 3
    assert not (overlaid.checkpoints.folder / BASELINE_FILE).exists()
    assert list(overlaid.checkpoints.layers.iterdir()) == []  # the overlay is gone
    rewind(overlaid, 0)
    assert tree(ws) == start


def test_shell_replacing_folders_files_and_modes_is_undone_exactly(overlaid: Tools) -> None:
    ws = overlaid.workspace
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("a\n")
    (ws / "pkg" / "sub" / "b.py").write_text("b\n")
    (ws / "build").mkdir()
    (ws / "build" / "out.o").write_bytes(b"\x00\x01")
    (ws / "notes").write_text("a file that becomes a folder\n")
    (ws / "run.sh").write_text("echo run\n")
    (ws / "moved").mkdir()
    (ws / "moved" / "inner.txt").write_text("inner\n")
    os.symlink("pkg/a.py", ws / "link")
    start, start_modes = tree(ws), modes(ws)
    overlaid.run(
        "shell",
        command="rm -rf pkg && mkdir pkg && echo fresh > pkg/new.py"  # an opaque folder
        " && rm -rf build && echo now-a-file > build"  # a folder becomes a file
        " && rm notes && mkdir notes && echo x > notes/n.txt"  # a file becomes a folder
        " && chmod +x run.sh && mv moved renamed && ln -sfn run.sh link",
    )
    assert tree(ws) == {
        "build": b"now-a-file\n",
        "link": "-> run.sh",
        "notes": "/",
        "notes/n.txt": b"x\n",
        "pkg": "/",
        "pkg/new.py": b"fresh\n",
        "renamed": "/",
        "renamed/inner.txt": b"inner\n",
        "run.sh": b"echo run\n",
    }
    assert modes(ws)["run.sh"] & 0o111
    paths = {c.path for c in overlaid.checkpoints.changes()}
    assert {"pkg/a.py", "pkg/sub/b.py", "build/out.o", "moved/inner.txt"} <= paths
    rewind(overlaid, 0)
    assert tree(ws) == start
    assert modes(ws) == start_modes


def test_files_the_command_did_not_touch_keep_their_inode_and_time(overlaid: Tools) -> None:
    ws = overlaid.workspace
    (ws / "stay.txt").write_text("stay\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "stay.txt").write_text("stay\n")
    before = {p: os.lstat(ws / p) for p in ("stay.txt", "dir/stay.txt")}
    overlaid.run("shell", command="cat stay.txt dir/stay.txt > /dev/null && touch dir/other")
    for path, old in before.items():
        now = os.lstat(ws / path)
        assert (now.st_ino, now.st_mtime_ns) == (old.st_ino, old.st_mtime_ns)
    assert [c.path for c in overlaid.checkpoints.changes()] == ["dir/other"]


def test_control_paths_stay_read_only_and_nothing_reaches_them(overlaid: Tools) -> None:
    ws = overlaid.workspace
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    record = overlaid.executor.execute(
        overlaid_call("echo evil >> .git/config; echo ok > fine.txt"),
        overlaid.env,
        True,
        session_id=SID,
    )
    assert "Read-only file system" in record.result.llm_content
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / "fine.txt").read_text() == "ok\n"


def overlaid_call(command: str) -> ToolCallPart:
    return ToolCallPart(id="call-control", name="shell", args={"command": command})


def test_a_failing_command_still_leaves_what_it_wrote(overlaid: Tools) -> None:
    ws = overlaid.workspace
    record = overlaid.executor.execute(
        overlaid_call("echo partial > half.txt; exit 3"),
        overlaid.env,
        True,
        session_id=SID,
    )
    assert not record.success
    assert (ws / "half.txt").read_text() == "partial\n"
    assert [c.path for c in overlaid.checkpoints.changes()] == ["half.txt"]


def test_where_no_overlay_can_be_mounted_the_stat_scan_is_used(tmp_path: Path) -> None:
    ws = tmp_path / "odd:name"  # overlayfs' options cannot hold a colon
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    executor = ToolExecutor(
        ToolSettings(sandbox=SandboxSettings(wall_time_s=20, memory_mb=512)),
        workspace=ws,
        checkpoints=CheckpointSettings(),
        checkpoints_root=tmp_path / "snapshots",
    )
    tools = Tools(executor, ws.resolve(), {"PATH": os.environ.get("PATH", os.defpath)})
    assert not overlay_usable(tools.workspace, tools.checkpoints.layers)
    start = tree(ws)
    tools.run("shell", command="echo two >> a.txt && echo b > b.txt")
    assert (tools.checkpoints.folder / BASELINE_FILE).exists()  # the scan's baseline
    assert sorted(c.path for c in tools.checkpoints.changes()) == ["a.txt", "b.txt"]
    rewind(tools, 0)
    assert tree(ws) == start


_names = st.sampled_from(["a", "b", "d/c"])
_shell_ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), _names, st.sampled_from(["one", "two\n", ""])),
        st.tuples(st.just("append"), _names, st.sampled_from(["+", "more\n"])),
        st.tuples(st.just("rm"), _names, st.just("")),
        st.tuples(st.just("mv"), _names, _names),
        st.tuples(st.just("tree"), _names, st.just("")),
        st.tuples(st.just("chmod"), _names, st.just("")),
        st.tuples(st.just("link"), _names, st.sampled_from(["d", "b", "../outside", "none"])),
    ),
    min_size=1,
    max_size=4,
)


def shell_command(kind: str, name: str, arg: str) -> str:
    """One operation as a shell command (a path of the wrong kind is replaced, a missing
    one skipped; through a symlink it may fail: the calls end with ``true``)."""
    parent = f"mkdir -p $(dirname {name})"
    if kind == "write":
        return f"{parent}; rm -rf {name}; printf '{arg}' > {name}"
    if kind == "append":
        return f"{parent}; [ -d {name} ] || printf '{arg}' >> {name}"
    if kind == "rm":
        return f"rm -rf {name}"
    if kind == "mv":
        return (
            f"if [ -e {name} ] && [ {name} != {arg} ]; then rm -rf {arg}; {parent}; "
            f"mkdir -p $(dirname {arg}); mv {name} {arg}; fi; true"
        )
    if kind == "tree":
        return f"rm -rf {name}; mkdir -p {name}/sub && echo x > {name}/sub/f"
    if kind == "link":  # a folder or a file replaced by a symlink (issue 35, item 9)
        return f"{parent}; rm -rf {name}; ln -s {arg} {name}"
    return f"[ -f {name} ] && chmod +x {name}; true"


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=_shell_ops, cut=st.integers(0, 4))
def test_property_shell_calls_rewound_then_rerun_reproduce_the_same_files(
    overlaid: Tools, ops: list[tuple[str, str, str]], cut: int
) -> None:
    """Real shell calls (on the overlay) that create, overwrite, append, delete, rename,
    replace files by folders, folders by symlinks and chmod: one rewind to any point
    gives the files (and modes) as they were there, and running the same calls again
    gives the same end."""
    ws = overlaid.workspace
    for path in sorted(ws.iterdir()):
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    first = len(overlaid.ids)
    states = [(tree(ws), modes(ws))]
    for op in ops:
        overlaid.run("shell", command=shell_command(*op) + " 2>/dev/null; true")
        states.append((tree(ws), modes(ws)))
    at = min(cut, len(ops))
    plan = plan_rewind(overlaid.checkpoints.changes(), set(overlaid.ids[first + at :]))
    apply_rewind(plan, overlaid.checkpoints.blobs, on_conflict="refuse")
    assert (tree(ws), modes(ws)) == states[at]
    for op in ops[at:]:
        overlaid.run("shell", command=shell_command(*op) + " 2>/dev/null; true")
    assert (tree(ws), modes(ws)) == states[-1]


def test_a_workspace_holding_a_mount_gets_no_overlay(tmp_path: Path) -> None:
    """An overlay does not reach into a file system mounted under the workspace (the
    command would see an empty folder): / holds /proc, a fresh folder holds nothing."""
    assert has_submounts(Path("/"))
    assert not has_submounts(tmp_path)


def test_an_overlay_on_another_file_system_is_copied_in(tmp_path: Path) -> None:
    """The checkpoints on /dev/shm, the workspace on disk: the upper folder's files
    cannot be renamed into the workspace, they are copied (content, mode, time)."""
    shm = Path("/dev/shm")
    if not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no writable /dev/shm on another file system")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    with tempfile.TemporaryDirectory(dir=shm) as snapshots:
        executor = ToolExecutor(
            ToolSettings(sandbox=SandboxSettings(wall_time_s=20, memory_mb=512)),
            workspace=ws,
            checkpoints=CheckpointSettings(),
            checkpoints_root=Path(snapshots),
        )
        tools = Tools(executor, ws.resolve(), {"PATH": os.environ.get("PATH", os.defpath)})
        if not overlay_usable(tools.workspace, tools.checkpoints.layers):
            pytest.skip("overlayfs cannot be mounted with its upper folder on /dev/shm")
        start = tree(ws)
        tools.run("shell", command="echo two >> a.txt && printf new > b.txt && chmod +x b.txt")
        assert tree(ws) == {"a.txt": b"one\ntwo\n", "b.txt": b"new"}
        assert os.stat(ws / "b.txt").st_mode & 0o111
        assert list(tools.checkpoints.layers.iterdir()) == []
        rewind(tools, 0)
        assert tree(ws) == start
