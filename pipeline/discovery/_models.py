"""The records of file discovery: what a scan is asked, what it found, each file.

Example::

    options = DiscoveryOptions(root=Path("."), max_depth=4)
    result: DiscoveryResult = FileDiscoveryService().scan(options)
    result.entry("README.md").type        # "file"
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

ChangeEvent = Literal["add", "change", "unlink"]
EntryKind = Literal["file", "directory", "symlink"]
ChangeCallback = Callable[[ChangeEvent, str], None]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class FileEntry(_Model):
    """One discovered file (``type`` is ``symlink`` for a link that was not followed,
    ``directory`` for a nested repository or a submodule, listed as one entry)."""

    path: str
    relative_path: str
    type: EntryKind = "file"
    size: int | None = None
    modified: datetime | None = None


class DiscoveryOptions(_Model):
    """What to scan. ``None`` means the value of ``services.fileDiscovery``.

    ``include_patterns`` keep only the files they match; ``exclude_patterns`` leave
    out files and whole directories; both use gitignore syntax (``*.py`` at any
    depth, ``src/**/*.ts`` from the root).
    """

    root: Path
    max_depth: Annotated[int, Field(ge=0)] | None = None
    include_patterns: tuple[str, ...] = ()
    exclude_patterns: tuple[str, ...] = ()
    follow_symlinks: bool | None = None
    max_files: Annotated[int, Field(ge=1)] | None = None
    allow_broad_root: bool = False


class DiscoveryNote(_Model):
    """Something the user should know about a scan: it is never silent."""

    kind: Literal[
        "unreadable", "cap_reached", "symlink_loop", "depth_limit", "git_unavailable", "time_limit"
    ]
    path: str
    message: str


class ScanStats(_Model):
    """Counters of one scan (of the scan that filled the cache, for a cached result)."""

    directories_scanned: int = 0
    directories_ignored: int = 0
    files_ignored: int = 0
    ignore_files: int = 0
    elapsed_ms: float = 0.0


class DiscoveryResult(_Model):
    """The files of one scan, as paths relative to ``root``, ``/``-separated, sorted."""

    root: str
    files: tuple[str, ...]
    symlinks: frozenset[str] = frozenset()
    repositories: frozenset[str] = frozenset()
    """Entries of :attr:`files` that are nested repositories (``name/``) or submodules."""
    notes: tuple[DiscoveryNote, ...] = ()
    truncated: bool = False
    depth_limited: bool = False
    """Directories below the depth limit were left out (see the ``depth_limit`` note)."""
    time_limited: bool = False
    """The scan ran out of time (``scanTimeS``) and left directories out (see the
    ``time_limit`` note)."""
    tracked: int = 0
    """How many paths git's index holds under the root (0 outside a work tree)."""
    from_cache: bool = False
    stats: ScanStats = Field(default_factory=ScanStats)

    def entries(self, with_stats: bool = False) -> list[FileEntry]:
        """The files as :class:`FileEntry` objects; ``with_stats`` reads size and
        modification time now (never from the cache, so they are never stale)."""
        return [self.entry(relative, with_stats) for relative in self.files]

    def entry(self, relative: str, with_stats: bool = False) -> FileEntry:
        """The :class:`FileEntry` of one of :attr:`files`."""
        kind: EntryKind = "file"
        if relative in self.repositories:
            kind = "directory"
        elif relative in self.symlinks:
            kind = "symlink"
        return make_entry(self.root, relative, kind, with_stats)


def make_entry(root: str, relative: str, kind: EntryKind, with_stats: bool) -> FileEntry:
    if kind == "directory":  # a nested repository or a submodule: one entry
        path = os.path.join(root, relative.rstrip("/"))
        return FileEntry(path=path, relative_path=relative, type="directory")
    path = os.path.join(root, relative)
    is_link = kind == "symlink"
    if not with_stats:
        return FileEntry(path=path, relative_path=relative, type=kind)
    try:
        info = os.lstat(path) if is_link else os.stat(path)
    except OSError:
        return FileEntry(path=path, relative_path=relative, type=kind)
    modified = datetime.fromtimestamp(info.st_mtime, UTC)
    return FileEntry(
        path=path, relative_path=relative, type=kind, size=info.st_size, modified=modified
    )
