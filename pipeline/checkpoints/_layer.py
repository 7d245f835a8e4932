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
real workspace what the command saw: each file put in place atomically (a
temporary name in its folder, then a rename), a deleted folder removed.

Example::

    paths = touched(upper, workspace)        # ["a.py", "old", "old/x.txt"]
    ...                                      # keep their previous state
    failed = apply_upper(upper, workspace)   # [] when every path was applied
"""

from __future__ import annotations

import contextlib
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


def _lower_kind(workspace: Path, rel: str) -> str | None:
    try:
        mode = os.lstat(workspace / rel).st_mode
    except OSError:
        return None
    return "dir" if stat.S_ISDIR(mode) else "other"


def _subtree(workspace: Path, rel: str) -> list[str]:
    """Every path under the workspace's folder ``rel`` (not ``rel`` itself)."""
    return [f"{rel}/{sub}" for sub in scan(workspace / rel)]


def touched(upper: Path, workspace: Path) -> list[str]:
    """The workspace paths (relative, sorted) the upper folder changes or may change."""
    found: set[str] = set()
    pending = [("", str(upper))]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.name in SKIPPED_DIRS:  # never kept (the scan skips them too)
                    continue
                st = entry.stat(follow_symlinks=False)
                found.add(rel)
                lower = _lower_kind(workspace, rel)
                is_dir = stat.S_ISDIR(st.st_mode)
                replaced = lower == "dir" and (
                    not is_dir or is_whiteout(st) or is_opaque(entry.path)
                )
                if replaced:
                    found.update(_subtree(workspace, rel))
                if is_dir:
                    pending.append((rel + "/", entry.path))
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


def _place(source: Path, target: Path, st: os.stat_result) -> None:
    """Put the upper folder's file or symlink ``source`` at ``target`` atomically."""
    temporary = target.with_name(f".{target.name[:200]}.ollm-{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(source), temporary)
    else:
        try:  # the same file system: the upper file itself moves in, nothing copied
            os.rename(source, temporary)
        except OSError:
            shutil.copy2(source, temporary, follow_symlinks=False)
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
    os.replace(temporary, target)


def apply_upper(upper: Path, workspace: Path) -> list[tuple[str, str]]:
    """Make ``workspace`` what the overlay showed; returns ``(path, reason)`` for each
    path that could not be applied (its upper copy is left where it is)."""
    failed: list[tuple[str, str]] = []
    pending = [("", upper)]
    while pending:
        prefix, folder = pending.pop()
        with os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = prefix + entry.name
            target = workspace / rel
            try:
                st = entry.stat(follow_symlinks=False)
                if is_whiteout(st):
                    _remove(target)
                elif stat.S_ISDIR(st.st_mode):
                    if is_opaque(entry.path) or not (target.is_dir() and not target.is_symlink()):
                        _remove(target)
                        target.mkdir()
                    os.chmod(target, stat.S_IMODE(st.st_mode))
                    pending.append((rel + "/", Path(entry.path)))
                elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    _place(Path(entry.path), target, st)
                elif stat.S_ISFIFO(st.st_mode):
                    _remove(target)
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
