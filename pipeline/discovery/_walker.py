"""The walker: ``os.scandir`` depth first, deciding about each entry as it meets it.

It applies git's ignore semantics (:mod:`ollm_cli.pipeline.discovery._ignore_rules`)
and never enters an ignored directory, except for the files git tracks below it.
It records the modification time of each directory it lists, so that the
service can revalidate a cached result with one ``stat`` per directory.

It stops when the scan's :class:`~ollm_cli.pipeline.discovery._budget.Budget` runs
out of time, whether that happens between two directories or while the rules decide
about an entry (:class:`~ollm_cli.pipeline.discovery._budget.OutOfTime`): then the
directory it was listing is left out whole, and named with those not listed yet.

Example::

    plan = Plan(root="/src/app", max_depth=8, follow_symlinks=False, max_files=1000,
                time_s=10, include=None, exclude=None, builtin=(), key=())
    budget = Budget(time.monotonic, time.monotonic() + plan.time_s)
    found = walk(plan, root_stack(plan.root, builtin, None, budget), read_git(plan.root),
                 None, None, budget)
    found.files                  # unsorted relative paths
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from ollm_cli.pipeline.discovery._budget import Budget, OutOfTime
from ollm_cli.pipeline.discovery._git import GitView
from ollm_cli.pipeline.discovery._ignore_rules import (
    GITIGNORE,
    IGNORED_BY_OLLM,
    KEPT,
    OLLMIGNORE,
    IgnoreStack,
    RootRules,
    RuleSet,
    UnreadIgnoreFile,
    log_symlinked_gitignore,
)
from ollm_cli.pipeline.discovery._log import LazyLogger
from ollm_cli.pipeline.discovery._models import DiscoveryNote, EntryKind

if TYPE_CHECKING:
    from ollm_cli.pipeline.discovery._listings import Listings

logger = LazyLogger(__name__)

MISSING = -1
"""The modification time recorded for a path that does not exist."""


class Plan(NamedTuple):
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
    record_stamps: bool = True
    """Record the modification time of each directory and ignore file (one ``stat``
    each) so that the result can be cached; a scan that is not cached skips them."""


class Walk:
    """What one walk found, filled in as it goes."""

    __slots__ = (
        "cancelled",
        "depth_cut",
        "files",
        "hidden_root",
        "ignored_root",
        "notes",
        "repositories",
        "slow_rules",
        "stamps",
        "stats",
        "symlinks",
        "timed_out",
        "truncated",
    )

    def __init__(
        self,
        files: list[str],
        symlinks: set[str],
        notes: list[DiscoveryNote],
        stamps: list[tuple[str, int]],
        stats: dict[str, int],
    ) -> None:
        self.files = files
        self.symlinks = symlinks
        self.notes = notes
        self.stamps = stamps
        self.stats = stats
        self.repositories: set[str] = set()
        self.truncated = False
        self.cancelled = False
        self.depth_cut = 0
        self.timed_out: list[str] = []
        """The directories (relative) left unlisted when the time ran out."""
        self.slow_rules = ""
        """The ignore file whose rules were being read, compiled or matched when the
        time ran out (``""``: none)."""
        self.hidden_root = ""
        """The directory above the root (or the root) a ``.ollmignore`` rule hides:
        then nothing is listed."""
        self.ignored_root = ""
        """The directory above the root (or the root) git's rules or the built-ins
        ignore, once an untracked entry asked: then only tracked files are listed."""


def mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return MISSING


# The directories, from the top down to this one, whose own verdict is not asked yet
# (see _Walker._entries), each as the question that asks it (its parent's rules'
# verdict on it; for the root, what the rules above it say): () when none is. A
# deferred directory's subdirectories are pushed before it may be asked.
_Deferred = tuple[Callable[[], int], ...]
# (absolute dir, relative dir, depth, the parent's rules, ancestors' (dev, inode),
#  tracked files only, deferred)
_Pending = tuple[str, str, int, IgnoreStack, tuple[tuple[int, int], ...], bool, _Deferred]
_Batch = list[tuple[str, EntryKind]]
_NOTHING: frozenset[str] = frozenset()


def walk(
    plan: Plan,
    root_rules: RootRules,
    git_view: GitView,
    on_batch: Callable[[_Batch], None] | None,
    cancel: threading.Event | None,
    budget: Budget,
    ahead: Listings | None = None,
) -> Walk:
    """Walk ``plan.root`` depth first, pruning ignored directories as it goes,
    until ``budget``'s time is up (then the directories not yet listed are named).

    An ignored directory that holds files git tracks is entered in *tracked-only*
    mode: there, and below, only tracked files are listed, as git does; so is the
    root when the rules above it ignore it (``root_rules.enclosing``). A directory
    in ``ahead`` (listed while git ran) is not listed again.
    """
    return _Walker(plan, git_view, on_batch, cancel, budget, ahead).run(root_rules)


class _Here(NamedTuple):
    """What :meth:`_Walker._entries` knows of the directory it decides about."""

    rel_dir: str
    depth: int
    rules: IgnoreStack
    verdict: Callable[[str, bool], int]
    """Its rules' verdict on one of its entries (name, is it a directory)."""
    ancestors: tuple[tuple[int, int], ...]
    enter: bool
    """Whether its subdirectories are walked into (``maxDepth`` not reached)."""
    batch: _Batch
    subdirs: list[_Pending]


class _CapReached(Exception):
    """``maxFiles`` files are listed: the walk stops where it is."""


class _Walker:
    """One walk's state; :meth:`run` lists one directory at a time."""

    def __init__(
        self,
        plan: Plan,
        git_view: GitView,
        on_batch: Callable[[_Batch], None] | None,
        cancel: threading.Event | None,
        budget: Budget,
        ahead: Listings | None = None,
    ) -> None:
        self.plan = plan
        self.ahead = ahead
        self.tracked = git_view.tracked
        self.in_repository = git_view.repository is not None
        self.on_batch = on_batch
        self.cancel = cancel
        self.budget = budget
        self.found = Walk([], set(), [], [], _counts())

    def run(self, root_rules: RootRules) -> Walk:
        found = self.found
        enclosing = root_rules.enclosing
        # Below an ignored directory only what git tracks is listed, from wherever the
        # walk starts; whether the root is below one is asked when it matters.
        above: _Deferred = () if enclosing is None else (enclosing.verdict,)
        pending: list[_Pending] = [(self.plan.root, "", 0, root_rules.stack, (), False, above)]
        try:
            if enclosing is not None and enclosing.hidden():
                found.hidden_root = enclosing.hidden()
                return found
            while pending:
                if self.cancel is not None and self.cancel.is_set():
                    found.cancelled = True
                    break
                if self.budget.passed():
                    found.timed_out = [pending_dir[1] or "." for pending_dir in reversed(pending)]
                    break
                item = pending.pop()
                try:
                    pending.extend(reversed(self._directory(item)))
                except OutOfTime:
                    pending.append(item)  # left out whole: named with those not listed
                    raise
        except _CapReached:
            pass
        except OutOfTime as stop:
            found.timed_out = [pending_dir[1] or "." for pending_dir in reversed(pending)]
            found.slow_rules = stop.source
        if enclosing is not None:
            found.ignored_root = enclosing.ignored_at
        return found

    def _directory(self, item: _Pending) -> list[_Pending]:
        """List one directory: its files are added, its subdirectories returned."""
        directory, rel_dir, _, rules, ancestors, tracked_only, _ = item
        listed = self._list(directory, rel_dir)
        if listed is None:
            return []
        entries, info = listed
        if info is not None and self.plan.follow_symlinks:
            ancestors = (*ancestors, (info.st_dev, info.st_ino))
        names = [entry.name for entry in entries]
        if rel_dir:
            nested = not tracked_only and self.in_repository
            child_rules = self._read_ignore_files(entries, names, rel_dir, rules, nested)
            if child_rules is None:
                # A repository of its own: git lists it as one entry and stops.
                repository: _Batch = []
                self._add(repository, rel_dir + "/", "directory", rel_dir)
                self._flush(repository)
                return []
            rules = child_rules
        batch: _Batch = []
        found = self.found
        before = len(found.files)
        try:
            subdirs = self._entries(entries, names, item, rules, ancestors, batch)
        except OutOfTime:
            # Left out whole, as if not listed yet: what it added is taken back.
            for relative in found.files[before:]:
                found.symlinks.discard(relative)
                found.repositories.discard(relative)
            del found.files[before:]
            raise
        except _CapReached:
            self._flush(batch)
            raise
        self._flush(batch)
        return subdirs

    def _list(
        self, directory: str, rel_dir: str
    ) -> tuple[list[os.DirEntry[str]], os.stat_result | None] | None:
        """The entries of ``directory`` and, when needed, its ``stat``; ``None`` (and
        a note) when it cannot be read."""
        plan = self.plan
        try:
            info = os.stat(directory) if plan.record_stamps or plan.follow_symlinks else None
            entries = self.ahead.take(directory) if self.ahead is not None else None
            if entries is None:
                with os.scandir(directory) as iterator:
                    entries = list(iterator)
        except OSError as error:
            reason = error.strerror or type(error).__name__
            self.found.notes.append(
                DiscoveryNote(
                    kind="unreadable",
                    path=rel_dir or ".",
                    message=f"skipped {rel_dir or 'the root'}: {reason}",
                )
            )
            logger.info("file discovery skipped %s: %s", directory, reason)
            return None
        self.found.stats["dirs"] += 1
        if info is not None and plan.record_stamps:
            self.found.stamps.append((directory, info.st_mtime_ns))
        return entries, info

    def _read_ignore_files(
        self,
        entries: list[os.DirEntry[str]],
        names: list[str],
        rel_dir: str,
        rules: IgnoreStack,
        nested: bool,
    ) -> IgnoreStack | None:
        """``rules`` with this directory's ``.gitignore`` and ``.ollmignore`` added, or
        ``None`` for a nested repository (a ``.git`` here, when ``nested`` may be,
        and git tracks no file below: git walks into a directory it tracks files in).
        ``names`` are the entries' names (looked up at C speed: most directories
        have no ignore file)."""
        if nested and ".git" in names and not self.tracked.has_under(rel_dir):
            return None
        git_file: UnreadIgnoreFile | None = None
        ollm_file: RuleSet | None = None
        for name in (GITIGNORE, OLLMIGNORE):
            if name not in names:
                continue
            entry = entries[names.index(name)]
            path = entry.path
            if self.plan.record_stamps:
                self.found.stamps.append((path, mtime_ns(path)))
            if name == GITIGNORE and entry.is_symlink():
                log_symlinked_gitignore(path)
                continue
            self.found.stats["ignore_files"] += 1
            if name == GITIGNORE:  # read when a rule is asked (the .ollmignore decides at_once)
                git_file = UnreadIgnoreFile(path, rel_dir)
            else:
                ollm_file = RuleSet.from_file(path, rel_dir, self.budget) or None
        return rules.child(git_file, ollm_file)

    def _entries(
        self,
        entries: list[os.DirEntry[str]],
        names: list[str],
        item: _Pending,
        rules: IgnoreStack,
        ancestors: tuple[tuple[int, int], ...],
        batch: _Batch,
    ) -> list[_Pending]:
        """Decide about each entry of one directory (the hot loop: what a clean clone
        needs is inline, the rest is :meth:`_decide`).

        A directory git tracks files under is entered whatever git's rules say of
        it: they only decide whether it is entered for its tracked files alone. So,
        when nothing but git's rules could leave an entry out, such a directory is
        pushed *deferred*: its own verdict is asked (and the ignore files above it
        compiled) only when one of its entries is not a file git tracks. In a clean
        clone that is never."""
        rel_dir, depth, tracked_only, deferred = item[1], item[2], item[5], item[6]
        plan, tracked, files = self.plan, self.tracked, self.found.files
        max_files, exclude, include = plan.max_files, plan.exclude, plan.include
        # A regular file git tracks is listed whatever git's ignore rules say: only a
        # .ollmignore rule, --exclude or --include could leave it out, so without
        # them it is listed at once and its name never matched (in a clean clone:
        # every file but the untracked ones).
        at_once = not rules.ollm and exclude is None and include is None and self.on_batch is None
        listed_at_once = tracked.files if at_once else _NOTHING
        verdict_here = rules.for_directory(rel_dir).verdict
        enter = depth < plan.max_depth
        here = _Here(rel_dir, depth, rules, verdict_here, ancestors, enter, batch, [])
        prefix = rel_dir + "/" if rel_dir else ""
        for name, entry in zip(names, entries, strict=True):
            if name == ".git":
                continue
            relative = prefix + name
            try:
                is_file = entry.is_file(follow_symlinks=False)
                if is_file and relative in listed_at_once and len(files) < max_files:
                    files.append(relative)
                    continue
                if is_file:
                    is_dir = is_link = special = False
                else:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    is_link = not is_dir and entry.is_symlink()
                    if is_link and plan.follow_symlinks:
                        is_dir = entry.is_dir()
                    special = not is_dir and not is_link
            except OSError:  # pragma: no cover - is_dir() swallows all but rare errors
                is_dir = is_link = special = False
            if (
                at_once
                and is_dir
                and not is_link
                and relative not in tracked.files
                and tracked.has_under(relative)
            ):
                # Entered whatever git's rules say: only how is left to decide (below
                # an ignored one, nothing: it is not deferred; below one not asked
                # yet, both are asked when it is: git's rules ignore what is below an
                # ignored directory, tracked files apart).
                later: _Deferred = ()
                if not tracked_only:
                    later = (*deferred, partial(verdict_here, name, True))
                self._push(here, entry.path, relative, tracked_only, later)
                continue
            # What git tracks stays whatever git's rules say, and below an ignored
            # directory nothing else does: without .ollmignore rules or --exclude,
            # there is nothing to ask of either.
            known = at_once and relative in tracked.files
            if deferred and not known:  # the first entry that needs this directory's mode
                asked, deferred = len(deferred), ()
                if self._resolved(item)[5]:
                    tracked_only = True
                    here.subdirs[:] = [(*sub[:5], True, ()) for sub in here.subdirs]
                else:
                    here.subdirs[:] = [(*sub[:6], sub[6][asked:]) for sub in here.subdirs]
            known = known or (at_once and tracked_only)
            self._decide(here, entry, name, relative, is_dir, is_link, special, known, tracked_only)
        return here.subdirs

    def _push(
        self, here: _Here, path: str, relative: str, tracked_only: bool, deferred: _Deferred
    ) -> None:
        """Walk into the directory ``relative`` next, unless ``maxDepth`` cuts it."""
        if not here.enter:
            self.found.depth_cut += 1
        else:
            here.subdirs.append(
                (path, relative, here.depth + 1, here.rules, here.ancestors, tracked_only, deferred)
            )

    def _decide(
        self,
        here: _Here,
        entry: os.DirEntry[str],
        name: str,
        relative: str,
        is_dir: bool,
        is_link: bool,
        special: bool,
        known: bool,
        tracked_only: bool,
    ) -> None:
        """List, push or leave out one entry that was not listed at once: its verdict
        by the rules (unless ``known`` to stay), then ``--exclude``, what git tracks,
        ``--include`` and the kind of entry decide."""
        plan, tracked, files = self.plan, self.tracked, self.found.files
        exclude, include = plan.exclude, plan.include
        verdict = KEPT if known else here.verdict(name, is_dir)
        if (
            verdict != IGNORED_BY_OLLM  # --exclude drops what git tracks too
            and exclude is not None
            and exclude.match(relative, name, is_dir)
        ):
            verdict = IGNORED_BY_OLLM
        if verdict != KEPT or tracked_only:
            # Ignored (or below an ignored directory): what git tracks stays.
            if not self._tracked_stays(relative, is_dir, verdict):
                return
            tracked_only = True
        if is_dir and relative not in tracked.files:
            # A directory git tracks is a submodule: one entry, never walked into.
            if not (here.enter and is_link) or self._leads_on(entry.path, relative, here.ancestors):
                self._push(here, entry.path, relative, tracked_only, ())
            return
        if special:  # a FIFO, socket or device: not a file (git skips them too)
            self.found.stats["files_ignored"] += 1
            return
        if include is not None and not include.match(relative, name, False):
            return
        if is_dir or is_link or self.on_batch is not None or len(files) >= plan.max_files:
            kind: EntryKind = "directory" if is_dir else "symlink" if is_link else "file"
            self._add(here.batch, relative, kind, here.rel_dir)
        else:  # a plain file, the common case
            files.append(relative)

    @staticmethod
    def _resolved(item: _Pending) -> _Pending:
        """A deferred directory with its own verdict asked, and those of the deferred
        directories above it (each of its parent's rules): tracked files only when
        git's rules ignore one of them."""
        ignored = item[5] or any(verdict() != KEPT for verdict in item[6])
        return (*item[:5], ignored, ())

    def _tracked_stays(self, relative: str, is_dir: bool, verdict: int) -> bool:
        """Whether an ignored entry stays because git tracks it (or files below it)."""
        tracked = self.tracked
        if verdict == IGNORED_BY_OLLM or not tracked:
            keep = False
        elif is_dir:
            keep = relative in tracked or tracked.has_under(relative)
        else:
            keep = relative in tracked
        if not keep:
            self.found.stats["dirs_ignored" if is_dir else "files_ignored"] += 1
        return keep

    def _leads_on(self, path: str, relative: str, ancestors: tuple[tuple[int, int], ...]) -> bool:
        """Whether a followed link to a directory leads somewhere new (not to a parent)."""
        target = _link_target(path)
        if target is not None and target not in ancestors:
            return True
        self.found.notes.append(
            DiscoveryNote(
                kind="symlink_loop",
                path=relative,
                message=f"not followed: {relative} leads back to a parent",
            )
        )
        return False

    def _add(self, batch: _Batch, relative: str, kind: EntryKind, rel_dir: str) -> None:
        found = self.found
        if len(found.files) >= self.plan.max_files:
            _cap(found, self.plan, rel_dir)
            raise _CapReached
        found.files.append(relative)
        if kind == "directory":
            found.repositories.add(relative)
        elif kind == "symlink":
            found.symlinks.add(relative)
        if self.on_batch is not None:
            batch.append((relative, kind))

    def _flush(self, batch: _Batch) -> None:
        if self.on_batch is not None and batch:
            self.on_batch(batch)


def out_of_time_at_start(slow_rules: str) -> Walk:
    """The walk of a scan whose time ran out before it began (reading the
    ``.ollmignore`` files above its root): nothing listed, the root left out."""
    found = Walk([], set(), [], [], _counts())
    found.timed_out = ["."]
    found.slow_rules = slow_rules
    return found


def _counts() -> dict[str, int]:
    return {"dirs": 0, "dirs_ignored": 0, "files_ignored": 0, "ignore_files": 0}


#: How many of the directories a timed-out scan left out its note names.
_NAMED_CUT = 5


def time_note(plan: Plan, left_out: list[str], slow_rules: str = "") -> DiscoveryNote:
    """What a scan cut by ``scanTimeS`` says: the directories it did not list, and the
    ignore file whose rules took the time when they did."""
    named = ", ".join(left_out[:_NAMED_CUT])
    more = len(left_out) - _NAMED_CUT
    rest = f" and {more} more" if more > 0 else ""
    where = f" while matching the rules of {slow_rules}" if slow_rules else ""
    advice = (
        "make its patterns fewer or simpler, or raise the limit"
        if slow_rules
        else "scan a smaller folder or raise the limit"
    )
    return DiscoveryNote(
        kind="time_limit",
        path=left_out[0],
        message=f"stopped after {plan.time_s:g} s (services.fileDiscovery.scanTimeS)"
        f"{where}: {len(left_out)} director{'y was' if len(left_out) == 1 else 'ies were'} "
        f"not listed ({named}{rest}); the listing is incomplete: {advice}",
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
