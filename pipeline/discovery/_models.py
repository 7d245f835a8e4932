"""The records of file discovery: what a scan is asked, what it found, each file.

They are frozen dataclasses, not pydantic models: ``ollm files`` builds one of
each per run, and a pydantic model's import and validator cost more than the
scan of a whole repository (they cross no process boundary as JSON: ``ollm
files --json`` writes its own payload from them).

Example::

    options = DiscoveryOptions(root=Path("."), max_depth=4)
    result: DiscoveryResult = FileDiscoveryService().scan(options)
    result.entry("README.md").type        # "file"
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # imported when a size and time are asked for (--stats)
    from datetime import datetime

ChangeEvent = Literal["add", "change", "unlink"]
EntryKind = Literal["file", "directory", "symlink"]
NoteKind = Literal[
    "unreadable", "cap_reached", "symlink_loop", "depth_limit", "git_unavailable", "time_limit"
]
ChangeCallback = Callable[[ChangeEvent, str], None]


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One discovered file (``type`` is ``symlink`` for a link that was not followed,
    ``directory`` for a nested repository or a submodule, listed as one entry)."""

    path: str
    relative_path: str
    type: EntryKind = "file"
    size: int | None = None
    modified: datetime | None = None


@dataclass(frozen=True, slots=True)
class DiscoveryOptions:
    """What to scan. ``None`` means the value of ``services.fileDiscovery``.

    ``include_patterns`` keep only the files they match; ``exclude_patterns`` leave
    out files and whole directories; both use gitignore syntax (``*.py`` at any
    depth, ``src/**/*.ts`` from the root). A negative ``max_depth`` or a
    ``max_files`` below 1 is a ``ValueError``.
    """

    root: Path
    max_depth: int | None = None
    include_patterns: tuple[str, ...] = ()
    exclude_patterns: tuple[str, ...] = ()
    follow_symlinks: bool | None = None
    max_files: int | None = None
    allow_broad_root: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.root, Path):  # a str from a caller: the path it names
            object.__setattr__(self, "root", Path(self.root))
        object.__setattr__(self, "include_patterns", tuple(self.include_patterns))
        object.__setattr__(self, "exclude_patterns", tuple(self.exclude_patterns))
        if self.max_depth is not None and self.max_depth < 0:
            raise ValueError(f"max_depth must be 0 or more, not {self.max_depth}")
        if self.max_files is not None and self.max_files < 1:
            raise ValueError(f"max_files must be 1 or more, not {self.max_files}")


@dataclass(frozen=True, slots=True)
class DiscoveryNote:
    """Something the user should know about a scan: it is never silent."""

    kind: NoteKind
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class ScanStats:
    """Counters of one scan (of the scan that filled the cache, for a cached result)."""

    directories_scanned: int = 0
    directories_ignored: int = 0
    files_ignored: int = 0
    ignore_files: int = 0
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class DiscoveryResult:
    """The files of one scan, as paths relative to ``root``, ``/``-separated, sorted.

    ``repositories`` are the entries of ``files`` that are nested repositories
    (``name/``) or submodules; ``depth_limited``: directories below the depth limit
    were left out (see the ``depth_limit`` note); ``time_limited``: the scan ran out
    of time (``scanTimeS``) and left directories out (see the ``time_limit`` note);
    ``tracked``: how many paths git's index holds under the root (0 outside a work
    tree).
    """

    root: str
    files: tuple[str, ...]
    symlinks: frozenset[str] = frozenset()
    repositories: frozenset[str] = frozenset()
    notes: tuple[DiscoveryNote, ...] = ()
    truncated: bool = False
    depth_limited: bool = False
    time_limited: bool = False
    tracked: int = 0
    from_cache: bool = False
    stats: ScanStats = field(default_factory=ScanStats)

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
    from datetime import UTC, datetime

    modified = datetime.fromtimestamp(info.st_mtime, UTC)
    return FileEntry(
        path=path, relative_path=relative, type=kind, size=info.st_size, modified=modified
    )
