"""An overlay's upper folder: which workspace paths a command changed, and applying them.

A command that ran with the workspace as an overlay (see the sandbox's
``_overlay``) left in the upper folder exactly what it changed:

- a regular file or symlink: created, or changed (a changed file is copied up
  whole, so its new content is all there);
- a character device 0/0, a *whiteout*: the path was deleted;
- a folder: a folder the command created, or one holding a change; an *opaque*
  folder (extended attribute ``user.overlay.opaque`` = ``y``) replaces the
  workspace's folder of that name, whose other entries were deleted;
- a file where the workspace has a folder, or the reverse: the workspace's entry
  was replaced, with everything under it.

:func:`touched` reads the upper folder into the workspace paths whose state may
differ (deleted subtrees included, read from the real workspace), cost growing
with what changed, not with the workspace; :func:`apply_upper` then makes the
real workspace what the command saw: each file put in place atomically (moved
over its path by one rename; from another file system, copied under a temporary
name in its folder first), a deleted folder removed.

Example::

    paths = touched(upper, workspace)        # ["a.py", "old", "old/x.txt"]
    ...                                      # keep their previous state
    failed = apply_upper(upper, workspace)   # [] when every path was applied
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from pathlib import Path

from ollm_cli.pipeline.checkpoints._manifest import SKIPPED_DIRS, scan

OPAQUE_XATTRS = ("user.overlay.opaque", "trusted.overlay.opaque")


def is_whiteout(st: os.stat_result) -> bool:
    """Whether an upper folder's entry marks a deletion."""
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def is_opaque(path: str) -> bool:
    """Whether an upper folder hides the workspace's folder of that name entirely."""
    for name in OPAQUE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _lower_is_dir(workspace: str, rel: str) -> bool:
    """Whether the workspace has a real folder at ``rel`` (the overlay's lower layer)."""
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(workspace, rel)).st_mode)
    except OSError:
        return False


def _subtree(workspace: Path, rel: str) -> list[str]:
    """Every path under the workspace's folder ``rel`` (not ``rel`` itself)."""
    return [f"{rel}/{sub}" for sub in scan(workspace / rel)]


def touched(upper: Path, workspace: Path) -> list[str]:
    """The workspace paths (relative, sorted) the upper folder changes or may change."""
    found: set[str] = set()
    lower = str(workspace)
    pending = [("", str(upper))]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.name in SKIPPED_DIRS:  # never kept (the scan skips them too)
                    continue
                found.add(rel)
                if entry.is_dir(follow_symlinks=False):
                    # a folder replaces the workspace's only when opaque
                    replaced = is_opaque(entry.path) and _lower_is_dir(lower, rel)
                    pending.append((rel + "/", entry.path))
                else:  # a file, a symlink, a whiteout: in place of a folder, if one was there
                    replaced = _lower_is_dir(lower, rel)
                if replaced:
                    found.update(_subtree(workspace, rel))
    return sorted(found)


def _remove(path: Path) -> None:
    """Remove what is at ``path`` (a folder with its contents), if anything."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _place(source: str, target: str) -> None:
    """Put the upper folder's file or symlink ``source`` at ``target`` atomically: one
    rename on the same file system (a folder in its place removed first), else a copy
    under a temporary name renamed over it."""
    try:
        os.rename(source, target)
        return
    except OSError as error:
        if error.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.EXDEV):
            raise
        moved = error.errno != errno.EXDEV
    if moved:  # a folder where the file goes: the command removed it
        shutil.rmtree(target)
        os.rename(source, target)
        return
    temporary = os.path.join(
        os.path.dirname(target), f".{os.path.basename(target)[:200]}.ollm-{os.getpid()}.tmp"
    )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    if os.path.islink(source):
        os.symlink(os.readlink(source), temporary)
    else:
        shutil.copy2(source, temporary, follow_symlinks=False)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
    os.replace(temporary, target)


def apply_upper(upper: Path, workspace: Path) -> list[tuple[str, str]]:
    """Make ``workspace`` what the overlay showed; returns ``(path, reason)`` for each
    path that could not be applied (its upper copy is left where it is)."""
    failed: list[tuple[str, str]] = []
    pending = [("", str(upper))]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = prefix + entry.name
            target = os.path.join(workspace, rel)
            try:
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    _place(entry.path, target)
                    continue
                st = entry.stat(follow_symlinks=False)
                if is_whiteout(st):
                    _remove(Path(target))
                elif stat.S_ISDIR(st.st_mode):
                    if is_opaque(entry.path) or not (
                        os.path.isdir(target) and not os.path.islink(target)
                    ):
                        _remove(Path(target))
                        os.mkdir(target)
                    os.chmod(target, stat.S_IMODE(st.st_mode))
                    pending.append((rel + "/", entry.path))
                elif stat.S_ISFIFO(st.st_mode):
                    _remove(Path(target))
                    os.mkfifo(target, stat.S_IMODE(st.st_mode))
                else:
                    failed.append((rel, "a socket or device, which cannot be moved"))
            except OSError as error:
                failed.append((rel, error.strerror or type(error).__name__))
    return failed


def remove_layer(folder: Path) -> None:
    """Remove an overlay's folder and everything in it, even the mode-0 folder
    overlayfs leaves in its work folder (nothing raised: what cannot go stays)."""

    def forced(_function: object, path: str, _exc: object) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(folder, onerror=forced)
