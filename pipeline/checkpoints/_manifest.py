"""A stat manifest of a workspace: what a shell command changed, without reading files.

:func:`scan` lists every file, symlink and folder under the workspace (never
following a symlink, never inside ``.git`` or ``.ollm``) with its kind, inode,
``mtime_ns``, size and mode. Two manifests, before and after a command, say which
paths it created, deleted or changed (:func:`diff`): a path whose kind, inode,
mtime, size or mode differs. Reading contents is the caller's business, and only
for what changed.

Example::

    before = scan(workspace)
    ...                                   # the command runs
    created, deleted, changed = diff(before, scan(workspace))
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import NamedTuple

SKIPPED_DIRS = frozenset({".git", ".ollm"})
"""Folders never scanned: the tools never write them and they are not the user's files."""


class Entry(NamedTuple):
    """One path's stat: ``kind`` is ``file``, ``symlink`` or ``dir``."""

    kind: str
    ino: int
    mtime_ns: int
    size: int
    mode: int


Manifest = dict[str, Entry]


_KINDS = {stat.S_IFREG: "file", stat.S_IFLNK: "symlink", stat.S_IFDIR: "dir"}
"""The kinds a checkpoint keeps; FIFOs, sockets and devices are not content."""
_entry = tuple.__new__  # an Entry without NamedTuple's slower constructor: 10,000 per scan


def scan(workspace: Path) -> Manifest:
    """Every file, symlink and folder under ``workspace``, by path relative to it."""
    found: Manifest = {}
    pending = [("", str(workspace))]
    kinds, file_type = _KINDS, stat.S_IFMT
    while pending:
        prefix, folder = pending.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                kind = kinds.get(file_type(st.st_mode))
                if kind is None:
                    continue
                rel = prefix + entry.name
                if kind == "dir":
                    if entry.name in SKIPPED_DIRS:
                        continue
                    pending.append((rel + "/", entry.path))
                found[rel] = _entry(
                    Entry, (kind, st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode & 0o7777)
                )
    return found


def diff(before: Manifest, after: Manifest) -> tuple[list[str], list[str], list[str]]:
    """``(created, deleted, changed)`` paths between two manifests, each sorted."""
    created = sorted(p for p in after if p not in before)
    deleted = sorted(p for p in before if p not in after)
    changed = sorted(
        p
        for p, old in before.items()
        if (new := after.get(p)) is not None
        and (new != old if old.kind != "dir" else new.kind != old.kind or new.mode != old.mode)
    )
    return created, deleted, changed


class FolderCheck:
    """Whether the folders leading to a workspace path are real folders now, none of
    them a symlink (or a file) in a folder's place: a path under such a one is not
    the path it was, and reading or writing it would reach another. Each folder is
    looked at once: make a new check once the workspace has changed.

    Example::

        folders = FolderCheck(workspace)
        folders.blocker("a/b/c.txt")      # ("a/b", "symlink") when a/b is one now
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._kinds: dict[str, str | None] = {}

    def _kind(self, folder: str) -> str | None:
        if folder not in self._kinds:
            try:
                mode = os.lstat(os.path.join(self.workspace, folder)).st_mode
            except (FileNotFoundError, NotADirectoryError):
                self._kinds[folder] = None
            else:
                self._kinds[folder] = _KINDS.get(stat.S_IFMT(mode), "file")
        return self._kinds[folder]

    def blocker(self, rel: str) -> tuple[str, str] | None:
        """The first folder leading to ``rel`` that is there but not a folder, and what
        it is (``symlink`` or ``file``); None when every one is a folder or missing."""
        parts = rel.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            kind = self._kind(folder)
            if kind is None:
                return None
            if kind != "dir":
                return folder, kind
        return None
