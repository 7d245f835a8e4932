"""The bubblewrap command line: namespaces, the read-only system, hidden paths,
the writable workspace with its control paths read-only, and the environment,
all passed through a memfd (``--args``) so that no value shows in a process listing.

Example::

    fd = args_memfd(bwrap, settings, workspace, env, workdir, guard, seccomp_fd=None)
    subprocess.run([bwrap, "--args", str(fd), "true"], pass_fds=(fd,))
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ollm_cli.config.paths import ollm_home
from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.tools._control_paths import ControlGuard
from ollm_cli.pipeline.tools._hidden_paths import hidden_paths

PROBE_TIMEOUT_S = 10.0
ROOT_SANDBOX_ID = 1000
"""The uid and gid a command started by root has inside the sandbox: mapped to root
outside (what it creates belongs to root), but with no capability, so it cannot
unmount, remount, chown or bypass file modes: root's files are its own, other
users' files it reads and writes only as their modes let anyone."""


@functools.lru_cache(maxsize=8)
def bwrap_has(bwrap: str, option: str) -> bool:
    """Whether this bubblewrap knows ``option`` (``--disable-userns`` came in 0.8)."""
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option.encode() in done.stdout + done.stderr


def memfd(name: str, data: bytes) -> int:
    """A memory file holding ``data``, read from its start (bubblewrap reads it)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def hide_args(paths: list[tuple[Path, bool]], workspace: Path | None = None) -> list[str]:
    args: list[str] = []
    for path, is_dir in paths:
        if is_dir and workspace is not None and workspace.is_relative_to(path):
            args += ["--tmpfs", str(path)]  # writable, so that the workspace can be bound in
        elif is_dir:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def namespace_args(
    bwrap_path: str, tmp_mb: int, *, network: bool, as_root: bool | None = None
) -> list[str]:
    """The namespaces and the system view every run gets (the probe's too);
    ``as_root``: whether bubblewrap is started as root (default: whether ollm runs as
    root; true in an overlay's namespace, see ``_overlay``)."""
    args = [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--size", str(tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
        "--unshare-all",
        "--unshare-user",
        "--new-session",
        "--die-with-parent",
    ]  # fmt: skip
    if bwrap_has(bwrap_path, "--disable-userns"):
        args.append("--disable-userns")  # no nested namespace to regain capabilities in
    if os.geteuid() == 0 if as_root is None else as_root:
        # Root keeps every capability in its user namespace (and could unmount the
        # read-only binds): run as an ordinary user there, with none at all.
        uid = str(ROOT_SANDBOX_ID)
        args += ["--uid", uid, "--gid", uid, "--cap-drop", "ALL"]
    if network:
        args.append("--share-net")
    return args


def args_memfd(
    bwrap_path: str,
    settings: SandboxSettings,
    workspace: Path,
    env: Mapping[str, str],
    workdir: Path,
    guard: ControlGuard,
    seccomp_fd: int | None,
    *,
    as_root: bool | None = None,
) -> int:
    """A memfd holding bubblewrap's whole command line but the command itself
    (``as_root``: see :func:`namespace_args`)."""
    options = namespace_args(bwrap_path, settings.tmp_mb, network=settings.network, as_root=as_root)
    if seccomp_fd is not None:
        options += ["--seccomp", str(seccomp_fd)]
    homes = [Path.home()]
    if env.get("HOME"):
        homes.append(Path(env["HOME"]))
    hidden = hidden_paths(settings, homes, ollm_home())
    inside = [(p, d) for p, d in hidden if p.is_relative_to(workspace)]
    # Hidden folders become empty read-only tmpfs, hidden files /dev/null; those
    # holding the workspace are hidden first, the workspace is bound back in.
    options += hide_args([(p, d) for p, d in hidden if (p, d) not in inside], workspace)
    # The workspace is bound after /tmp's tmpfs so that a workspace under /tmp shows.
    options += ["--bind", str(workspace), str(workspace)]
    options += hide_args(inside)
    # The workspace's control paths stay read-only: a tool that could write
    # .ollm/config.yaml or .git/hooks could make the next command run code.
    options += guard.bind_args()
    options += ["--clearenv"]
    for name, value in env.items():
        options += ["--setenv", name, value]
    options += ["--chdir", str(workdir)]
    return memfd("ollm-bwrap-args", b"".join(arg.encode() + b"\0" for arg in options))
