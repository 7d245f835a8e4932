"""The file tools under attack: a concurrent symlink swapper, special files, control folders."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.tools import ToolContext
from ollm_cli.pipeline.tools._files import (
    EditFileArgs,
    EditFileTool,
    ReadFileArgs,
    ReadFileTool,
    WriteFileArgs,
    WriteFileTool,
)
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools._search import GrepArgs, GrepTool
from ollm_cli.pipeline.tools._workspace import open_in_workspace

SWAPPER = """
import os, shutil, sys
ws, outside, progress = sys.argv[1], sys.argv[2], sys.argv[3]
os.chdir(ws)
swaps = 0
while True:
    try:
        os.rename("sub", "sub.real")
        os.symlink(outside, "sub")
        for _ in range(300):  # hold each state a moment, so checks and opens straddle a swap
            pass
        os.unlink("sub")
        os.rename("sub.real", "sub")
        for _ in range(300):
            pass
        swaps += 1
        if swaps % 50 == 0:
            with open(progress, "w") as out:
                out.write(str(swaps))
    except OSError:  # a tool made "sub" again in between: put things back and go on
        if os.path.islink("sub"):
            os.unlink("sub")
        if os.path.isdir("sub.real"):
            if os.path.isdir("sub"):
                shutil.rmtree("sub", ignore_errors=True)
            try:
                os.rename("sub.real", "sub")
            except OSError:
                pass
"""


def test_a_concurrent_symlink_swapper_never_gets_a_read_or_write_outside(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE SECRET\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "secret.txt").write_text("inside\n")
    progress = tmp_path / "swaps"
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace), str(outside), str(progress)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    reads = writes = refused = 0
    try:
        for attempt in range(1500):
            try:
                out = ReadFileTool().run(ReadFileArgs(path="sub/secret.txt"), ctx)
                assert "OUTSIDE" not in out.llm_content
                reads += 1
            except (ToolError, FileNotFoundError):  # the swapper's clean-up removed a file
                refused += 1
            try:
                WriteFileTool().run(WriteFileArgs(path=f"sub/w{attempt % 7}.txt", content="x"), ctx)
                writes += 1
            except (ToolError, FileNotFoundError):  # the swapper's clean-up removed a file
                refused += 1
            try:
                EditFileTool().run(
                    EditFileArgs(path="sub/secret.txt", old_string="inside", new_string="inside"),
                    ctx,
                )
            except (ToolError, FileNotFoundError):  # the swapper's clean-up removed a file
                refused += 1
    finally:
        swapper.kill()
        swapper.wait()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "OUTSIDE SECRET\n"
    assert reads > 0 and writes > 0  # the tools still worked between swaps
    assert int(progress.read_text()) >= 50  # and the swapper really swapped meanwhile


def test_temporary_files_are_made_in_the_opened_folder(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    """Swapping the folder after it was opened cannot move the write elsewhere."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "sub").mkdir()
    with open_in_workspace(workspace, "sub/new.txt", for_write=True) as entry:
        os.rename(workspace / "sub", workspace / "sub.moved")
        os.symlink(outside, workspace / "sub")
        from ollm_cli.pipeline.tools._files import _write_atomically

        _write_atomically(entry, b"data")
    assert list(outside.iterdir()) == []
    assert (workspace / "sub.moved" / "new.txt").read_bytes() == b"data"


@pytest.mark.parametrize(
    "path",
    [".ollm/config.yaml", ".git/hooks/pre-commit", ".GIT/config", "./.ollm/x", "a/../.git/x"],
)
def test_tools_never_write_the_control_folders(
    ctx: ToolContext, workspace: Path, path: str
) -> None:
    (workspace / ".git").mkdir()
    (workspace / "a").mkdir()
    with pytest.raises(ToolError, match="may not write"):
        WriteFileTool().run(WriteFileArgs(path=path, content="hooks: []"), ctx)
    assert not (workspace / ".ollm").exists()
    assert list((workspace / ".git").iterdir()) == []


def test_a_symlink_into_a_control_folder_does_not_help(ctx: ToolContext, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "innocent").symlink_to(".git/config")
    with pytest.raises(ToolError, match="may not write"):
        WriteFileTool().run(WriteFileArgs(path="innocent", content="[core]\nx=1\n"), ctx)
    with pytest.raises(ToolError, match="may not write"):
        EditFileTool().run(EditFileArgs(path="innocent", old_string="[core]", new_string="x"), ctx)
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    # reading the control folders stays allowed
    assert "[core]" in ReadFileTool().run(ReadFileArgs(path=".git/config"), ctx).llm_content


def test_a_fifo_is_refused_at_once_by_every_file_tool(ctx: ToolContext, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    done = threading.Event()
    errors: list[str] = []

    def attempt() -> None:
        for call in (
            lambda: ReadFileTool().run(ReadFileArgs(path="pipe"), ctx),
            lambda: EditFileTool().run(
                EditFileArgs(path="pipe", old_string="a", new_string="b"), ctx
            ),
            lambda: WriteFileTool().run(WriteFileArgs(path="pipe", content="x"), ctx),
            lambda: GrepTool().run(GrepArgs(pattern="x", path="pipe"), ctx),
        ):
            try:
                call()
            except ToolError as error:
                errors.append(error.message)
        done.set()

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    if not done.wait(60):  # a hang guard only: a blocked open would never return
        # unblock the stuck open so the test process can end
        fd = os.open(workspace / "pipe", os.O_RDWR | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("a file tool blocked on a FIFO")
    assert len(errors) == 4
    assert all("FIFO" in message for message in errors), errors


def test_a_trailing_slash_on_a_file_is_refused(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "in.txt").write_text("text\n")
    with pytest.raises(ToolError, match="not a directory"):
        ReadFileTool().run(ReadFileArgs(path="in.txt/"), ctx)
    with pytest.raises(ToolError, match="not a directory"):
        WriteFileTool().run(WriteFileArgs(path="in.txt/", content="x"), ctx)


def test_write_file_caps_the_file_size(workspace: Path, plain_env: dict[str, str]) -> None:
    settings = SandboxSettings(max_file_mb=1)
    ctx = ToolContext(workspace=workspace, env=plain_env, sandbox=Sandbox(settings, workspace))
    with pytest.raises(ToolError, match="maxFileMb"):
        WriteFileTool().run(WriteFileArgs(path="big.txt", content="x" * (1024 * 1024 + 1)), ctx)
    assert not (workspace / "big.txt").exists()


def test_a_full_disk_leaves_the_old_content(
    workspace: Path, plain_env: dict[str, str], tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=True)
    try:
        (small / "keep.txt").write_text("precious\n")
        ctx = ToolContext(
            workspace=small, env=plain_env, sandbox=Sandbox(SandboxSettings(), workspace)
        )
        with pytest.raises(OSError):
            WriteFileTool().run(WriteFileArgs(path="keep.txt", content="y" * 2_000_000), ctx)
        assert (small / "keep.txt").read_text() == "precious\n"
        assert [p.name for p in small.iterdir()] == ["keep.txt"]
    finally:
        subprocess.run(["umount", str(small)], check=True)


OPEN_ONE = """
import ctypes, os, sys
from pathlib import Path
from ollm_cli.pipeline.tools._workspace import has_openat2, open_in_workspace

program = bytes.fromhex(sys.argv[2])
if program:  # the filter of the test: PR_SET_NO_NEW_PRIVS, then PR_SET_SECCOMP
    libc = ctypes.CDLL(None, use_errno=True)
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    fprog = Program(len(program) // 8, program)
    assert libc.prctl(38, 1, 0, 0, 0) == 0
    assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()
try:
    with open_in_workspace(Path(sys.argv[1]), "a/b.txt") as entry:
        where = os.readlink(f"/proc/self/fd/{entry.parent_fd}")
        print(has_openat2(), entry.shown, entry.name, where)
except Exception as error:
    print(has_openat2(), "failed:", type(error).__name__, error)
"""

# The system calls the test's filter looks at, by machine (as _seccomp's table).
_OPENAT = {"x86_64": 257, "aarch64": 56}
_OPENAT2 = 437


def _filter(*, walk_refused: bool, openat2_refused: bool) -> bytes:
    """A seccomp program refusing ``openat`` with ``O_NOFOLLOW`` (how the walk opens each
    folder; no import, no ``os.open`` of the workspace's root uses it) with ``EACCES``,
    and ``openat2`` with ``ENOSYS`` (as a container runtime's filter does)."""
    import errno
    import platform

    from ollm_cli.pipeline.tools.isolation._seccomp import (
        _ABIS,
        _ALLOW,
        _JEQ_K,
        _JSET_K,
        _LD_W_ABS,
        _RET_K,
        _arg,
        _deny,
        _insn,
    )

    machine = platform.machine()
    body = [_insn(_LD_W_ABS, 0)]  # the system call's number
    if walk_refused:
        body += [
            _insn(_JEQ_K, _OPENAT[machine], jf=3),
            _insn(_LD_W_ABS, _arg(2)),  # openat's flags
            _insn(_JSET_K, os.O_NOFOLLOW, jf=1),
            _deny(errno.EACCES),
            _insn(_LD_W_ABS, 0),
        ]
    if openat2_refused:
        body += [_insn(_JEQ_K, _OPENAT2, jf=1), _deny(errno.ENOSYS)]
    body.append(_insn(_RET_K, _ALLOW))
    # another architecture's calls (none here) go straight to the last instruction
    arch = [_insn(_LD_W_ABS, 4), _insn(_JEQ_K, _ABIS[machine].audit_arch, jf=len(body) - 1)]
    return b"".join(arch + body)


def _open_one(workspace: Path, program: bytes = b"") -> str:
    done = subprocess.run(
        [sys.executable, "-c", OPEN_ONE, str(workspace), program.hex()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _kernel_has_openat2() -> bool:
    major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    return (major, minor) >= (5, 6)


def test_openat2_is_used_where_the_kernel_has_it(workspace: Path) -> None:
    """With every ``openat`` the walk would make refused, the entry is still found: the
    one ``openat2`` call found it. With ``openat2`` refused too, it is not (the filter
    bites), so it was not found some other way."""
    import platform

    if platform.machine() not in _OPENAT:
        pytest.skip(f"the test's filter knows no system call numbers of {platform.machine()}")
    if not _kernel_has_openat2():
        pytest.skip(f"this kernel ({os.uname().release}) has no openat2 (Linux 5.6)")
    (workspace / "a").mkdir()
    (workspace / "a" / "b.txt").write_text("b\n")
    expected = f"True a/b.txt b.txt {workspace.resolve() / 'a'}"
    assert _open_one(workspace) == expected
    assert _open_one(workspace, _filter(walk_refused=True, openat2_refused=False)) == expected
    refused = _open_one(workspace, _filter(walk_refused=True, openat2_refused=True))
    assert refused.startswith("False failed:") and "Permission denied" in refused


def test_without_openat2_the_walk_gives_the_same_entry(workspace: Path) -> None:
    """Where ``openat2`` fails with ``ENOSYS`` (an old kernel, a container's filter), the
    check says so and the walk finds the same entry; with only that refused, by the
    test's filter, and inside the tool sandbox, whose own filter refuses it."""
    (workspace / "a").mkdir()
    (workspace / "a" / "b.txt").write_text("b\n")
    walked = _open_one(workspace, _filter(walk_refused=False, openat2_refused=True))
    assert walked == f"False a/b.txt b.txt {workspace.resolve() / 'a'}"
    sandbox = Sandbox(SandboxSettings(), workspace)
    if not sandbox.available:
        pytest.skip("bubblewrap cannot run here")
    inside = sandbox.run(
        [sys.executable, "-c", OPEN_ONE, str(workspace), ""],
        env={"PATH": os.defpath, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    assert inside.exit_code == 0, inside.stderr
    assert inside.stdout.strip() == walked


@given(st.lists(st.sampled_from(["a", "..", ".", "link_out", "link_in", "f.txt", ""]), max_size=6))
def test_no_path_opens_outside(tmp_path_factory: pytest.TempPathFactory, parts: list[str]) -> None:
    base = tmp_path_factory.mktemp("prop")
    workspace, outside = base / "ws", base / "out"
    (workspace / "a").mkdir(parents=True)
    outside.mkdir()
    (outside / "f.txt").write_text("OUT")
    (workspace / "a" / "f.txt").write_text("in")
    (workspace / "link_out").symlink_to(outside)
    (workspace / "link_in").symlink_to("a")
    path = "/".join(parts) or "."
    try:
        with open_in_workspace(workspace, path) as entry:
            where = os.readlink(f"/proc/self/fd/{entry.parent_fd}")
            assert Path(where).is_relative_to(workspace.resolve())
    except ToolError:
        pass
