"""Issue 27 on real bubblewrap: what a command could do with root's capabilities, a
host Unix socket or a setuid bit, tried from inside and refused.

The root cases run as root (this machine and CI run as root) and are skipped
elsewhere; the socket and setuid cases hold for every user.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.pipeline.tools._sandbox import Sandbox, SandboxResult
from ollm_cli.pipeline.tools.isolation._bwrap import ROOT_SANDBOX_ID
from ollm_cli.pipeline.tools.isolation._seccomp import build_program, filter_program

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the root cases need root")


def bash(sandbox: Sandbox, script: str, env: dict[str, str]) -> SandboxResult:
    return sandbox.run(["bash", "-c", script], env=env)


@as_root
def test_root_has_no_capability_inside(sandbox: Sandbox, plain_env: dict[str, str]) -> None:
    result = bash(sandbox, "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; id -u", plain_env)
    lines = result.stdout.split()
    assert dict(zip(lines[0:8:2], lines[1:8:2], strict=True)) == {
        "CapPrm:": "0000000000000000",
        "CapEff:": "0000000000000000",
        "CapBnd:": "0000000000000000",
        "CapAmb:": "0000000000000000",
    }
    assert lines[-1] == str(ROOT_SANDBOX_ID)


@as_root
def test_root_cannot_unmount_the_read_only_git_and_write_a_hook(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    result = bash(
        sandbox,
        "umount .git; umount -l .git; echo 'touch /tmp/x' > .git/hooks/pre-commit",
        plain_env,
    )
    assert "must be superuser" in result.stderr or "not permitted" in result.stderr
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


@as_root
def test_root_cannot_unhide_shadow_nor_remount_the_system(
    sandbox: Sandbox, plain_env: dict[str, str]
) -> None:
    if not Path("/etc/shadow").exists():
        pytest.skip("no /etc/shadow here")
    result = bash(
        sandbox,
        "umount /etc/shadow; cat /etc/shadow; mount -o remount,rw /; "
        "touch /ollm-sandbox-escape; unshare -Urm true && echo nested",
        plain_env,
    )
    assert "must be superuser to unmount" in result.stderr
    assert "root:" not in result.stdout  # still covered
    assert not Path("/ollm-sandbox-escape").exists()
    assert "nested" not in result.stdout


def test_a_setuid_bit_cannot_be_set_by_any_route(
    sandbox: Sandbox, workspace: Path, plain_env: dict[str, str]
) -> None:
    script = (
        "cp /bin/sh shell; chmod u+s shell; chmod 4755 shell; chmod g+s shell; "
        "install -m 4755 /bin/sh shell2; "
        "python3 -c \"import os; os.open('shell3', os.O_CREAT | os.O_WRONLY, 0o4755)\"; "
        "python3 -c \"import os; os.mknod('shell4', 0o104755)\"; "
        "mkdir t && cd t && cp /bin/sh s && chmod 2755 s; true"
    )
    result = bash(sandbox, script, plain_env)
    assert "Operation not permitted" in result.stderr
    for path in workspace.rglob("*"):
        mode = path.lstat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), f"{path.name} kept {oct(mode)}"
    assert (workspace / "shell").exists()  # the copy itself was allowed


@pytest.fixture
def host_socket(tmp_path: Path) -> Iterator[Path]:
    """A Unix socket listening outside the workspace, as a user bus or docker.sock."""
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    try:
        yield path
    finally:
        server.close()


def test_a_host_unix_socket_cannot_be_reached(
    sandbox: Sandbox, host_socket: Path, plain_env: dict[str, str]
) -> None:
    script = f"""
import socket
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    try:
        s = socket.socket(socket.AF_UNIX, kind)
        s.connect({str(host_socket)!r})
        print("connected")
    except OSError as error:
        print("refused", error.errno)
a, b = socket.socketpair()
a.sendall(b"x")
print("pair", b.recv(1).decode())
"""
    result = sandbox.run(["python3", "-c", script], env=plain_env)
    assert result.stdout.split("\n")[:3] == ["refused 1", "refused 1", "pair x"]


def test_the_socket_is_reachable_without_the_sandbox(host_socket: Path) -> None:
    """The attack's teeth: the same connect works from the host."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(host_socket))
    client.close()


def test_the_filter_program_is_well_formed() -> None:
    for machine in ("x86_64", "aarch64"):
        program = filter_program(machine)
        assert program is not None and len(program) % 8 == 0
        instructions = [
            struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)
        ]
        for index, (code, jt, jf, _) in enumerate(instructions):
            if code & 0x07 == 0x05:  # a jump: both targets inside the program
                assert index + 1 + max(jt, jf) < len(instructions)
        assert instructions[-1] == (0x06, 0, 0, 0x7FFF0000)  # allow what no rule refused
    assert filter_program("riscv128") is None
    assert build_program.__doc__
