"""The walker: ``os.scandir`` depth first, deciding about each entry as it meets it.

It applies git's ignore semantics (:mod:`ollm_cli.pipeline.discovery._ignore_rules`)
and never enters an ignored directory, except for the files git tracks below it.
It records the modification time of each directory it lists, so that the
service can revalidate a cached result with one ``stat`` per directory.

Example::

    plan = Plan(root="/src/app", max_depth=8, follow_symlinks=False, max_files=1000,
                time_s=10, include=None, exclude=None, builtin=(), key=())
    found = walk(plan, stack, read_git(plan.root), None, None, Deadline(time.monotonic, 1e9))
    found.files                  # unsorted relative paths
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ollm_cli.pipeline.discovery._git import GitView
from ollm_cli.pipeline.discovery._ignore_rules import (
    GITIGNORE,
    IGNORED_BY_OLLM,
    KEPT,
    OLLMIGNORE,
    IgnoreStack,
    RuleSet,
    log_symlinked_gitignore,
)
from ollm_cli.pipeline.discovery._models import DiscoveryNote, EntryKind

logger = logging.getLogger(__name__)

MISSING = -1
"""The modification time recorded for a path that does not exist."""


@dataclass(frozen=True)
class Plan:
    """Options resolved against the settings, with everything compiled once."""

    root: str
    max_depth: int
    follow_symlinks: bool
    max_files: int
    time_s: float
    include: RuleSet | None
    exclude: RuleSet | None
    builtin: tuple[str, ...]
    key: tuple[object, ...]


@dataclass
class Walk:
    files: list[str]
    symlinks: set[str]
    notes: list[DiscoveryNote]
    stamps: list[tuple[str, int]]
    stats: dict[str, int]
    repositories: set[str] = field(default_factory=set)
    truncated: bool = False
    cancelled: bool = False
    depth_cut: int = 0
    timed_out: list[str] = field(default_factory=list)
    """The directories (relative) left unlisted when the time ran out."""


def mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return MISSING


# (absolute dir, relative dir, depth, rules, ancestors' (dev, inode), tracked files only)
_Pending = tuple[str, str, int, IgnoreStack, tuple[tuple[int, int], ...], bool]


def walk(
    plan: Plan,
    root_rules: IgnoreStack,
    git_view: GitView,
    on_batch: Callable[[list[tuple[str, EntryKind]]], None] | None,
    cancel: threading.Event | None,
    deadline: Deadline,
) -> Walk:
    """Walk ``plan.root`` depth first, pruning ignored directories as it goes,
    until ``deadline`` passes (then the directories not yet listed are named).

    An ignored directory that holds files git tracks is entered in *tracked-only*
    mode: there, and below, only tracked files are listed, as git does.
    """
    walk = Walk(
        [], set(), [], [], {"dirs": 0, "dirs_ignored": 0, "files_ignored": 0, "ignore_files": 0}
    )
    files, symlinks, notes, stamps, counts = (
        walk.files,
        walk.symlinks,
        walk.notes,
        walk.stamps,
        walk.stats,
    )
    include, exclude = plan.include, plan.exclude
    follow, max_depth, max_files = plan.follow_symlinks, plan.max_depth, plan.max_files
    tracked = git_view.tracked
    in_repository = git_view.repository is not None
    join = os.path.join
    pending: list[_Pending] = [(plan.root, "", 0, root_rules, (), False)]
    while pending:
        if cancel is not None and cancel.is_set():
            walk.cancelled = True
            break
        if deadline.passed():
            walk.timed_out = [pending_dir[1] or "." for pending_dir in reversed(pending)]
            break
        directory, rel_dir, depth, rules, ancestors, tracked_only = pending.pop()
        try:
            info = os.stat(directory)
            with os.scandir(directory) as iterator:
                entries = list(iterator)
        except OSError as error:
            reason = error.strerror or type(error).__name__
            notes.append(
                DiscoveryNote(
                    kind="unreadable",
                    path=rel_dir or ".",
                    message=f"skipped {rel_dir or 'the root'}: {reason}",
                )
            )
            logger.info("file discovery skipped %s: %s", directory, reason)
            continue
        counts["dirs"] += 1
        stamps.append((directory, info.st_mtime_ns))
        if follow:
            ancestors = (*ancestors, (info.st_dev, info.st_ino))
        batch: list[tuple[str, EntryKind]] = []
        if rel_dir:
            git_file = ollm_file = None
            nested = False
            for entry in entries:
                name = entry.name
                if name == ".git" and in_repository and not tracked_only:
                    nested = True
                    break
                if name in (GITIGNORE, OLLMIGNORE):
                    path = entry.path
                    stamps.append((path, mtime_ns(path)))
                    if name == GITIGNORE and entry.is_symlink():
                        log_symlinked_gitignore(path)
                        continue
                    loaded = RuleSet.from_file(path, rel_dir)
                    if loaded:
                        counts["ignore_files"] += 1
                        if name == GITIGNORE:
                            git_file = loaded
                        else:
                            ollm_file = loaded
            if nested:
                # A repository of its own: git lists it as one entry and stops.
                if len(files) >= max_files:
                    _cap(walk, plan, rel_dir)
                    return walk
                entry_name = rel_dir + "/"
                files.append(entry_name)
                walk.repositories.add(entry_name)
                if on_batch is not None:
                    on_batch([(entry_name, "directory")])
                continue
            rules = rules.child(git_file, ollm_file)
        verdict_here = rules.for_directory(rel_dir).verdict
        prefix = rel_dir + "/" if rel_dir else ""
        enter = depth < max_depth
        subdirs: list[_Pending] = []
        for entry in entries:
            name = entry.name
            if name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_link = not is_dir and entry.is_symlink()
                if is_link and follow:
                    is_dir = entry.is_dir()
                special = not is_dir and not is_link and not entry.is_file(follow_symlinks=False)
            except OSError:  # pragma: no cover - is_dir() swallows all but rare errors
                is_dir = is_link = special = False
            relative = prefix + name
            verdict = verdict_here(name, is_dir)
            only_tracked = tracked_only
            if verdict == KEPT and exclude is not None and exclude.match(relative, name, is_dir):
                verdict = IGNORED_BY_OLLM
            if verdict != KEPT or tracked_only:
                # Ignored (or below an ignored directory): what git tracks stays.
                if verdict == IGNORED_BY_OLLM or not tracked:
                    keep = False
                elif is_dir:
                    keep = relative in tracked or tracked.has_under(relative)
                    only_tracked = True
                else:
                    keep = relative in tracked
                if not keep:
                    counts["dirs_ignored" if is_dir else "files_ignored"] += 1
                    continue
            if is_dir:
                # A directory git tracks is a submodule: one entry, never walked into.
                if relative not in tracked:
                    if not enter:
                        walk.depth_cut += 1
                        continue
                    if is_link:
                        target = _link_target(entry.path)
                        if target is None or target in ancestors:
                            notes.append(
                                DiscoveryNote(
                                    kind="symlink_loop",
                                    path=relative,
                                    message=f"not followed: {relative} leads back to a parent",
                                )
                            )
                            continue
                    subdirs.append(
                        (join(directory, name), relative, depth + 1, rules, ancestors, only_tracked)
                    )
                    continue
            elif special:  # a FIFO, socket or device: not a file (git skips them too)
                counts["files_ignored"] += 1
                continue
            if include is not None and not include.match(relative, name, False):
                continue
            if len(files) >= max_files:
                _cap(walk, plan, rel_dir)
                if on_batch is not None and batch:
                    on_batch(batch)
                return walk
            files.append(relative)
            if is_dir:
                walk.repositories.add(relative)
            elif is_link:
                symlinks.add(relative)
            if on_batch is not None:
                batch.append(
                    (relative, "directory" if is_dir else "symlink" if is_link else "file")
                )
        if on_batch is not None and batch:
            on_batch(batch)
        pending.extend(reversed(subdirs))
    return walk


@dataclass(frozen=True)
class Deadline:
    clock: Callable[[], float]
    at: float

    def passed(self) -> bool:
        return self.clock() >= self.at


#: How many of the directories a timed-out scan left out its note names.
_NAMED_CUT = 5


def time_note(plan: Plan, left_out: list[str]) -> DiscoveryNote:
    named = ", ".join(left_out[:_NAMED_CUT])
    more = len(left_out) - _NAMED_CUT
    rest = f" and {more} more" if more > 0 else ""
    return DiscoveryNote(
        kind="time_limit",
        path=left_out[0],
        message=f"stopped after {plan.time_s:g} s (services.fileDiscovery.scanTimeS): "
        f"{len(left_out)} director{'y was' if len(left_out) == 1 else 'ies were'} "
        f"not listed ({named}{rest}); "
        "the listing is incomplete: scan a smaller folder or raise the limit",
    )


def _cap(walk: Walk, plan: Plan, rel_dir: str) -> None:
    walk.truncated = True
    walk.notes.append(
        DiscoveryNote(
            kind="cap_reached",
            path=rel_dir or ".",
            message=f"stopped at {plan.max_files} files (services.fileDiscovery.maxFiles); "
            "the listing is incomplete",
        )
    )


def _link_target(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:  # pragma: no cover - the link broke between two system calls
        return None
    return info.st_dev, info.st_ino
