"""The workspace as an overlay: a sandboxed command writes to an upper folder, not to it.

For a tool call whose changes are checkpointed, the sandbox can show the command
the workspace through overlayfs: the real workspace is the (read-only) lower
layer and every write lands in an upper folder, so that afterwards the upper
folder holds exactly what the command changed (a deletion is a whiteout, a
replaced folder is opaque), whatever the size of the workspace. The caller then
keeps the previous state of those paths and applies the upper folder to the real
workspace (:meth:`WorkspaceOverlay.settle`, called by the sandbox when the
command is gone, before its control-path guard looks at the workspace).

bubblewrap before 0.10 cannot mount an overlay itself, so the command is started
as::

    unshare --user --map-root-user --mount --propagation private \\
        /bin/sh -c 'mount -t overlay overlay -o "$1" "$2" || exit 125; shift 2; exec "$@"' \\
        ollm-overlay userxattr,lowerdir=WS,upperdir=UP,workdir=WORK WS  bwrap --args ...

that is, in a user and mount namespace of its own, where the overlay is mounted
over the workspace's own path (``userxattr``: whiteouts and opaque marks in the
``user.overlay.*`` attributes an unprivileged mount may write); bubblewrap then
binds that path as it binds the workspace. The namespace, and the mount, die with
the command. Inside that namespace the launcher is root, so bubblewrap is told to
run the command as an ordinary uid with no capability (as when ollm runs as root).

Whether this works here (a kernel that allows overlayfs in a user namespace, an
upper folder on a file system with user extended attributes, the ``unshare`` and
``mount`` programs) is found by :func:`overlay_usable`, once per workspace and
upper folder; where it does not, the caller uses another way.

Example::

    if overlay_usable(workspace, scratch):
        overlay = WorkspaceOverlay(workspace, upper, work, settle=apply_upper)
        sandbox.run(["bash", "-c", "make"], env=env, overlay=overlay)
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ollm_cli.pipeline.checkpoints import remove_layer
from ollm_cli.pipeline.tools.isolation._bwrap import PROBE_TIMEOUT_S

logger = logging.getLogger(__name__)

_MOUNT_SCRIPT = 'mount -t overlay overlay -o "$1" "$2" || exit 125; shift 2; exec "$@"'
_UNSAFE = frozenset(",:\\\n")
"""Characters overlayfs' options would read as separators: such paths get no overlay."""


@dataclass(frozen=True)
class WorkspaceOverlay:
    """One command's overlay: the workspace, its upper and work folders, and what to
    do with the upper folder once the command is gone (``settle``, never raising)."""

    workspace: Path
    upper: Path
    work: Path
    settle: Callable[[], None]

    def options(self) -> str:
        """overlayfs' mount options for this overlay."""
        return f"userxattr,lowerdir={self.workspace},upperdir={self.upper},workdir={self.work}"

    def wrap(self, command: list[str]) -> list[str]:
        """``command`` started in a namespace where the workspace is this overlay."""
        return [*_namespace_prefix(), _MOUNT_SCRIPT, "ollm-overlay", self.options(),
                str(self.workspace), *command]  # fmt: skip


def _namespace_prefix() -> list[str]:
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private",
            "/bin/sh", "-c"]  # fmt: skip


def has_submounts(workspace: Path) -> bool:
    """Whether a file system is mounted somewhere under ``workspace``: an overlay does
    not reach into it (the command would see an empty folder there), so such a
    workspace gets no overlay."""
    prefix = str(workspace).rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", "rb") as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return True  # cannot tell: no overlay
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            point = fields[4].replace("\\040", " ").replace("\\011", "\t")
            if point.startswith(prefix):
                return True
    return False


def _safe(path: Path) -> bool:
    return not _UNSAFE.intersection(str(path))


@functools.lru_cache(maxsize=64)
def overlay_usable(workspace: Path, scratch: Path) -> bool:
    """Whether a command here can see ``workspace`` as an overlay whose upper folder is
    under ``scratch`` (a trial mount, with a deletion to check whiteouts; cached)."""
    if not (_safe(workspace) and _safe(scratch)) or shutil.which("unshare") is None:
        return False
    if shutil.which("mount") is None:
        return False
    try:
        scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
        trial = Path(tempfile.mkdtemp(prefix="probe-", dir=scratch))
    except OSError as error:
        logger.info("checkpoints: no overlay: %s cannot be written (%s)", scratch, error.strerror)
        return False
    try:
        lower, upper, work = trial / "lower", trial / "upper", trial / "work"
        for folder in (lower, upper, work):
            folder.mkdir()
        (lower / "gone").write_bytes(b"")
        script = (
            'mount -t overlay overlay -o "$1" "$2" && rm "$2/gone" && '
            'mount -t overlay overlay -o "$3" "$4" && test -d "$4"'
        )
        trial_work = trial / "work2"
        trial_work.mkdir()
        trial_upper = trial / "upper2"
        trial_upper.mkdir()
        argv = [
            *_namespace_prefix(), script, "ollm-overlay-probe",
            f"userxattr,lowerdir={lower},upperdir={upper},workdir={work}", str(lower),
            f"userxattr,lowerdir={workspace},upperdir={trial_upper},workdir={trial_work}",
            str(workspace),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
                env={"PATH": os.defpath},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            logger.info("checkpoints: no overlay: the trial did not run (%s)", type(error).__name__)
            return False
        whiteout = upper / "gone"
        ok = done.returncode == 0 and whiteout.is_char_device() and (lower / "gone").exists()
        if not ok:
            detail = done.stderr.decode("utf-8", errors="replace").strip()[:200]
            logger.info("checkpoints: no overlay here (%s)", detail or f"exit {done.returncode}")
        return ok
    finally:
        remove_layer(trial)
