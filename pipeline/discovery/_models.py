"""The records of file discovery: what a scan is asked, what it found, each file.

They are named tuples (and :class:`DiscoveryOptions` a small class that checks
its values), not pydantic models or dataclasses: ``ollm files`` imports them at
every run, and a pydantic model's import and validator, or a dataclass's
generated methods, cost more than the scan of a repository. They cross no
process boundary as JSON (``ollm files --json`` writes its own payload).

Example::

    options = DiscoveryOptions(root=Path("."), max_depth=4)
    result: DiscoveryResult = FileDiscoveryService().scan(options)
    result.entry("README.md").type        # "file"
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:  # imported when a size and time are asked for (--stats)
    from datetime import datetime

ChangeEvent = Literal["add", "change", "unlink"]
EntryKind = Literal["file", "directory", "symlink"]
NoteKind = Literal[
    "unreadable",
    "cap_reached",
    "symlink_loop",
    "depth_limit",
    "git_unavailable",
    "time_limit",
    "rules_limit",
    "ignored_root",
]
ChangeCallback = Callable[[ChangeEvent, str], None]


class FileEntry(NamedTuple):
    """One discovered file (``type`` is ``symlink`` for a link that was not followed,
    ``directory`` for a nested repository or a submodule, listed as one entry)."""

    path: str
    relative_path: str
    type: EntryKind = "file"
    size: int | None = None
    modified: datetime | None = None


class DiscoveryOptions:
    """What to scan. ``None`` means the value of ``services.fileDiscovery``.

    ``include_patterns`` keep only the files they match; ``exclude_patterns`` leave
    out files and whole directories; both use gitignore syntax (``*.py`` at any
    depth, ``src/**/*.ts`` from the root). A negative ``max_depth`` or a
    ``max_files`` below 1 is a ``ValueError``. Read-only once made.
    """

    __slots__ = (
        "allow_broad_root",
        "exclude_patterns",
        "follow_symlinks",
        "include_patterns",
        "max_depth",
        "max_files",
        "root",
    )
    root: Path
    max_depth: int | None
    include_patterns: tuple[str, ...]
    exclude_patterns: tuple[str, ...]
    follow_symlinks: bool | None
    max_files: int | None
    allow_broad_root: bool

    def __init__(
        self,
        root: Path | str,
        max_depth: int | None = None,
        include_patterns: Sequence[str] = (),
        exclude_patterns: Sequence[str] = (),
        follow_symlinks: bool | None = None,
        max_files: int | None = None,
        allow_broad_root: bool = False,
    ) -> None:
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be 0 or more, not {max_depth}")
        if max_files is not None and max_files < 1:
            raise ValueError(f"max_files must be 1 or more, not {max_files}")
        values = (
            Path(root),
            max_depth,
            tuple(include_patterns),
            tuple(exclude_patterns),
            follow_symlinks,
            max_files,
            allow_broad_root,
        )
        for name, value in zip(_OPTION_FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DiscoveryOptions are read-only (make new ones, not {name})")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _OPTION_FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DiscoveryOptions):
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[type[DiscoveryOptions], tuple[object, ...]]:
        return DiscoveryOptions, self._values()  # pickled by value (a worker, Ray)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _OPTION_FIELDS)
        return f"DiscoveryOptions({shown})"


_OPTION_FIELDS = (
    "root",
    "max_depth",
    "include_patterns",
    "exclude_patterns",
    "follow_symlinks",
    "max_files",
    "allow_broad_root",
)


class DiscoveryNote(NamedTuple):
    """Something the user should know about a scan: it is never silent."""

    kind: NoteKind
    path: str
    message: str


class ScanStats(NamedTuple):
    """Counters of one scan (of the scan that filled the cache, for a cached result)."""

    directories_scanned: int = 0
    directories_ignored: int = 0
    files_ignored: int = 0
    ignore_files: int = 0
    elapsed_ms: float = 0.0


class DiscoveryResult(NamedTuple):
    """The files of one scan, as paths relative to ``root``, ``/``-separated, sorted.

    ``repositories`` are the entries of ``files`` that are nested repositories
    (``name/``) or submodules; ``depth_limited``: directories below the depth limit
    were left out (see the ``depth_limit`` note); ``time_limited``: the scan ran out
    of time (``scanTimeS``) and left directories out (see the ``time_limit`` note);
    ``rules_limited``: an ignore file held more rules than a scan keeps, and what git
    does not track below it was left out (see the ``rules_limit`` note);
    ``tracked``: how many paths git's index holds under the root (0 outside a work
    tree). :attr:`partial` says whether any limit left files out.
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
    stats: ScanStats = ScanStats()
    rules_limited: bool = False

    @property
    def partial(self) -> bool:
        """Whether a limit left out files the rules let through (``maxFiles``,
        ``maxDepth``, ``scanTimeS``, the rules' memory): the listing is incomplete."""
        return self.truncated or self.depth_limited or self.time_limited or self.rules_limited

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
