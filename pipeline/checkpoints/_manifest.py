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
