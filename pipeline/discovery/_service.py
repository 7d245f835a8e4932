"""FileDiscoveryService: the project files a model may see (Requirement 6).

A walker of our own on ``os.scandir`` that decides about each entry as it
meets it, with git's ignore semantics (:mod:`ollm_cli.pipeline.discovery._ignore_rules`), and never
enters a directory that is ignored. Results are cached per root and options and
revalidated by the modification times of the directories walked (one ``stat``
per directory, none per file), or by a watcher on the root when one runs.

Inside a git work tree the listing equals ``git ls-files --cached --others
--exclude-standard``, less the built-in ignores of untracked content:

- files git tracks are always listed, whatever the ignore rules say (only a
  ``.ollmignore`` rule hides them): the index is read from ``.git/index`` when it
  exists, or by ``git ls-files -z --cached`` when only git can read it (run so
  that nothing the repository's own config names can run:
  :mod:`ollm_cli.pipeline.discovery._git`), and an ignored directory holding
  tracked files is entered for those files only;
- a nested repository (a directory with its own ``.git``) is one entry,
  ``name/``, and is not walked into; a submodule is one entry, ``name``;
- only regular files and symbolic links are listed (no FIFOs, sockets, devices);
- the user's global excludes file (``core.excludesFile``) applies.

Outside a work tree (or without git installed) it is the scan alone.

Depth: files directly in the root are at depth 0, files in ``root/a`` at depth
1; ``max_depth=N`` lists files down to depth ``N`` (``fd --max-depth N+1``).
When the limit leaves directories out, the result says so (a ``depth_limit``
note and ``depth_limited``).

Time: a scan takes at most ``scanTimeS`` (10 s), its ignore rules' reading,
compiling and matching included; one that runs out stops with a ``time_limit`` note
naming the directories it did not list (and the ignore file whose rules took the
time, if they did) and ``time_limited``, and is not cached.

Memory: a scan holds at most :data:`~ollm_cli.pipeline.discovery._budget.MAX_RULE_CHARS`
of ignore rules; an ignore file whose rules do not fit hides what git does not track
below its directory, with a ``rules_limit`` note (and ``rules_limited``).

A root below an ignored directory of its work tree (``ollm files l1`` with ``l1``
in ``.gitignore``) lists only what git tracks there, as ``git ls-files`` does in
it, and one below a directory a ``.ollmignore`` rule hides lists nothing; an
``ignored_root`` note says which.

Example::

    service = FileDiscoveryService()
    result = service.scan(DiscoveryOptions(root=Path("."), max_depth=4))
    result.files                 # ("README.md", "src/app.py", ...) sorted like git
    result.notes                 # unreadable directories, cap reached, symlink loops
    handle = service.watch_changes(Path("."), lambda event, path: print(event, path))
    handle.dispose()

The records are in ``_models``, the walker in ``_walker``, the watcher in
``_watcher``, git's ignore rules in ``_ignore_rules`` and the git runs in ``_git``;
:class:`FileDiscoveryService` here caches and puts them together.

``scan`` is synchronous and thread-safe (tools call it from worker threads);
``discover`` streams :class:`FileEntry` objects to async code and
``discover_all`` awaits the whole :class:`DiscoveryResult`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from ollm_cli.config.discovery_defaults import FILE_DISCOVERY_DEFAULTS
from ollm_cli.pipeline.discovery._budget import MAX_RULE_CHARS, Budget, OutOfTime
from ollm_cli.pipeline.discovery._git import GitRun, GitView, read_git
from ollm_cli.pipeline.discovery._ignore_rules import (
    OLLMIGNORE,
    IgnoreTree,
    NeverMatchesError,
    RuleSet,
    builtin_rules,
    parse_rule,
    root_stack,
)
from ollm_cli.pipeline.discovery._log import LazyLogger
from ollm_cli.pipeline.discovery._models import (
    ChangeCallback,
    ChangeEvent,
    DiscoveryNote,
    DiscoveryOptions,
    DiscoveryResult,
    EntryKind,
    FileEntry,
    ScanStats,
    make_entry,
)
from ollm_cli.pipeline.discovery._walker import (
    Plan,
    Walk,
    mtime_ns,
    out_of_time_at_start,
    time_note,
    walk,
)
from ollm_cli.pipeline.discovery._watcher import Disposable, Watcher
from ollm_cli.pipeline.errors import ToolError

__all__ = [
    "ChangeCallback",
    "ChangeEvent",
    "DiscoveryNote",
    "DiscoveryOptions",
    "DiscoveryResult",
    "Disposable",
    "FileDiscoveryService",
    "FileEntry",
    "ScanSettings",
    "ScanStats",
]

logger = LazyLogger(__name__)


class ScanSettings(Protocol):
    """What a scan reads of ``services.fileDiscovery``: the config model
    (:class:`~ollm_cli.config.settings.FileDiscoverySettings`) or, when nothing is
    configured, its defaults without the model
    (:data:`~ollm_cli.config.discovery_defaults.FILE_DISCOVERY_DEFAULTS`)."""

    @property
    def max_depth(self) -> int: ...
    @property
    def follow_symlinks(self) -> bool: ...
    @property
    def builtin_ignores(self) -> Sequence[str]: ...
    @property
    def max_files(self) -> int: ...
    @property
    def scan_time_s(self) -> float: ...


# A directory modified this close to the start of a scan may change again within
# the same filesystem timestamp tick; such a scan is not trusted by mtimes alone.
_RACY_S = 0.25


class _CacheEntry(NamedTuple):
    result: DiscoveryResult
    stamps: list[tuple[str, int]]
    trust_stamps: bool
    watcher: Watcher | None
    generation: int


def _compile_globs(patterns: tuple[str, ...], what: str) -> RuleSet | None:
    if not patterns:
        return None
    rules = []
    for pattern in patterns:
        try:
            rule = parse_rule(pattern)
        except NeverMatchesError:
            rule = None
        if rule is None or rule.negated:
            raise ToolError(
                f"the {what} pattern {pattern!r} is not a usable glob",
                hint="use gitignore syntax such as '*.py', 'src/**' or 'docs/*.md' "
                "(no leading '!', no unclosed '[')",
            )
        rules.append(rule)
    return RuleSet("", tuple(rules), what)


def _is_broad(root: Path) -> bool:
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # pragma: no cover - no HOME and no passwd entry
        return root == Path(root.anchor)
    return root == Path(root.anchor) or home == root or home.is_relative_to(root)


class FileDiscoveryService:
    """Scans project trees with git's ignore rules, caches the results and watches roots.

    One instance serves any number of roots. ``settings`` is
    ``services.fileDiscovery`` (defaults when omitted). A scan is trusted by
    directory mtimes only if none was modified within ``racy_window_s`` of its
    start (a later change could share the timestamp); a running watcher on the
    root is trusted instead, as long as it reported nothing since the scan began
    (its reports lag changes by about ``watch_step_ms``). With ``cache_size=0`` nothing
    is cached, and a scan saves the ``stat`` of each directory that the cache needs
    (a one-shot command such as ``ollm files``).
    """

    def __init__(
        self,
        settings: ScanSettings | None = None,
        *,
        cache_size: int = 32,
        watch_debounce_ms: int = 200,
        watch_step_ms: int = 10,
        racy_window_s: float = _RACY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings: ScanSettings = settings or FILE_DISCOVERY_DEFAULTS
        self._builtin = builtin_rules(self.settings.builtin_ignores)
        self._cache: OrderedDict[tuple[object, ...], _CacheEntry] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._watchers: dict[str, Watcher] = {}
        self._watch_debounce_ms = watch_debounce_ms
        self._watch_step_ms = watch_step_ms
        self._racy_ns = int(racy_window_s * 1e9)
        self._clock = clock

    # -- discovery -------------------------------------------------------------------

    def scan(self, options: DiscoveryOptions) -> DiscoveryResult:
        """Every file under ``options.root`` that is not ignored, from the cache when
        the tree has not changed since the last identical scan."""
        plan = self._plan(options)
        cached = self._lookup(plan)
        if cached is not None:
            return cached
        return self._scan(plan, None, None)

    async def discover(self, options: DiscoveryOptions) -> AsyncIterator[FileEntry]:
        """Yield the files as they are found (directory by directory, not sorted).

        The walk runs in a worker thread; leaving the loop early stops it.
        """
        import asyncio  # here, not at the top: `ollm files` never needs it (27 ms)

        plan = self._plan(options)
        cached = self._lookup(plan)
        if cached is not None:
            for index, relative in enumerate(cached.files):
                yield cached.entry(relative)
                if index % 1024 == 1023:
                    await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[list[tuple[str, EntryKind]] | None] = asyncio.Queue()
        cancel = threading.Event()

        def on_batch(batch: list[tuple[str, EntryKind]]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, batch)

        future = loop.run_in_executor(None, self._scan, plan, on_batch, cancel)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(queue.put_nowait, None))
        try:
            while (batch := await queue.get()) is not None:
                for relative, kind in batch:
                    yield make_entry(plan.root, relative, kind, False)
            await future
        finally:
            cancel.set()

    async def discover_all(self, options: DiscoveryOptions) -> DiscoveryResult:
        """The whole result of :meth:`scan`, without blocking the event loop."""
        import asyncio

        return await asyncio.to_thread(self.scan, options)

    def invalidate(self, root: Path | None = None) -> None:
        """Forget cached results (of ``root`` and the roots under it, or all)."""
        with self._lock:
            if root is None:
                self._cache.clear()
                return
            prefix = os.path.realpath(root)
            for key in [k for k in self._cache if _under(str(k[0]), prefix)]:
                del self._cache[key]

    # -- ignore rules ----------------------------------------------------------------

    def load_ignore_patterns(self, root: Path) -> IgnoreTree:
        """The ignore rules under ``root`` (``.gitignore``, ``.git/info/exclude``,
        ``.ollmignore``, built-ins), read lazily as paths are asked about."""
        resolved = self._checked_root(root, allow_broad=True)
        view = read_git(resolved)
        return IgnoreTree(resolved, self._builtin, view.excludes_file, view.tracked)

    def should_ignore(self, root: Path, rel_path: str, is_dir: bool = False) -> bool:
        """Whether discovery under ``root`` leaves out ``rel_path`` (the ignore files
        are read afresh: for many questions keep :meth:`load_ignore_patterns`)."""
        return self.load_ignore_patterns(root).should_ignore(rel_path, is_dir)

    # -- watching --------------------------------------------------------------------

    def watch_changes(
        self, root: Path, callback: ChangeCallback, *, ready_timeout_s: float = 10.0
    ) -> Disposable:
        """Call ``callback(event, path)`` for each change under ``root``: ``event`` is
        ``add``, ``change`` or ``unlink``, ``path`` relative to ``root``; ignored paths
        are not reported. The watch is running when this returns.

        The callback runs on the watcher's thread; it must not block for long.
        """
        resolved = self._checked_root(root, allow_broad=False)
        with self._lock:
            watcher = self._watchers.get(resolved)
            if watcher is None or not watcher.alive:
                view = read_git(resolved)
                tree = IgnoreTree(resolved, self._builtin, view.excludes_file, view.tracked)
                watcher = Watcher(resolved, tree, self._watch_debounce_ms, self._watch_step_ms)
                self._watchers[resolved] = watcher
                watcher.start(ready_timeout_s)
            token = watcher.add(callback)

        def stop() -> None:
            with self._lock:
                last = watcher.remove(token)
                if last and self._watchers.get(resolved) is watcher:
                    del self._watchers[resolved]
                else:
                    last = False
            if last:
                watcher.stop()

        return Disposable(stop)

    def dispose(self) -> None:
        """Stop every watcher and drop the cache."""
        with self._lock:
            watchers = list(self._watchers.values())
            self._watchers.clear()
            self._cache.clear()
        for watcher in watchers:
            watcher.stop()

    # -- internals -------------------------------------------------------------------

    def _checked_root(self, root: Path, *, allow_broad: bool) -> str:
        resolved = Path(os.path.realpath(root.expanduser()))
        if not resolved.exists():
            raise ToolError(
                f"cannot list files: {root} does not exist",
                hint="pass an existing directory (relative paths are taken from the current one)",
            )
        if not resolved.is_dir():
            raise ToolError(
                f"cannot list files: {root} is not a directory",
                hint="pass the directory that contains it",
            )
        if not allow_broad and _is_broad(resolved):
            raise ToolError(
                f"refusing to scan {resolved}: it is the filesystem root or holds your home folder",
                hint="scan a project directory, or allow it explicitly "
                "(`ollm files --all-roots`, DiscoveryOptions(allow_broad_root=True))",
            )
        return str(resolved)

    def _plan(self, options: DiscoveryOptions) -> Plan:
        root = self._checked_root(options.root, allow_broad=options.allow_broad_root)
        settings = self.settings
        max_depth = settings.max_depth if options.max_depth is None else options.max_depth
        follow = (
            settings.follow_symlinks if options.follow_symlinks is None else options.follow_symlinks
        )
        max_files = settings.max_files if options.max_files is None else options.max_files
        builtin = tuple(settings.builtin_ignores)
        key = (
            root,
            max_depth,
            follow,
            max_files,
            options.include_patterns,
            options.exclude_patterns,
            builtin,
        )
        return Plan(
            root=root,
            max_depth=max_depth,
            follow_symlinks=follow,
            max_files=max_files,
            time_s=settings.scan_time_s,
            include=_compile_globs(options.include_patterns, "include"),
            exclude=_compile_globs(options.exclude_patterns, "exclude"),
            builtin=builtin,
            key=key,
            record_stamps=self._cache_size > 0,
        )

    def _watcher_for(self, root: str) -> Watcher | None:
        for watched, watcher in self._watchers.items():
            if watcher.alive and _under(root, watched):
                return watcher
        return None

    def _lookup(self, plan: Plan) -> DiscoveryResult | None:
        with self._lock:
            entry = self._cache.get(plan.key)
            if entry is None:
                return None
            self._cache.move_to_end(plan.key)
        watcher = entry.watcher
        if watcher is not None and watcher.alive and watcher.generation == entry.generation:
            return entry.result
        if entry.trust_stamps and _stamps_unchanged(entry.stamps):
            return entry.result
        with self._lock:
            if self._cache.get(plan.key) is entry:
                del self._cache[plan.key]
        return None

    def _scan(
        self,
        plan: Plan,
        on_batch: Callable[[list[tuple[str, EntryKind]]], None] | None,
        cancel: threading.Event | None,
    ) -> DiscoveryResult:
        started_ns = time.time_ns()
        started = time.perf_counter()
        deadline = self._clock() + plan.time_s
        with self._lock:
            watcher = None if plan.follow_symlinks else self._watcher_for(plan.root)
            generation = watcher.generation if watcher is not None else 0
        # One budget for the whole scan: the rules are read, compiled and matched
        # within the time the walk has, and hold at most MAX_RULE_CHARS of text.
        budget = Budget(self._clock, deadline)
        git_run = GitRun(plan.root)
        try:
            root_rules = root_stack(plan.root, self._builtin, git_run.excludes_file(), budget)
        except OutOfTime as stop:  # a .ollmignore above the root took all the time
            root_rules, slow_rules = None, stop.source
        ahead = None
        if git_run.running and root_rules is not None:
            # while git reads the index, directories are listed ahead
            from ollm_cli.pipeline.discovery._listings import Listings

            ahead = Listings(plan.root, root_rules.stack, plan.max_depth)
        git_view = git_run.view(None if ahead is None else ahead.step)
        if root_rules is None:
            found = out_of_time_at_start(slow_rules)
        else:
            found = walk(plan, root_rules, git_view, on_batch, cancel, budget, ahead)
        if plan.record_stamps and root_rules is not None:
            consulted = [*root_rules.consulted, *git_view.consulted]
            found.stamps.extend((path, mtime_ns(path)) for path in consulted)
        found.files.sort()
        _add_notes(plan, found, git_view, budget)
        stats = ScanStats(
            directories_scanned=found.stats["dirs"],
            directories_ignored=found.stats["dirs_ignored"],
            files_ignored=found.stats["files_ignored"],
            ignore_files=found.stats["ignore_files"]
            + (0 if root_rules is None else root_rules.stack.files_found),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )
        result = DiscoveryResult(
            root=plan.root,
            files=tuple(found.files),
            symlinks=frozenset(found.symlinks),
            repositories=frozenset(found.repositories),
            notes=tuple(found.notes),
            truncated=found.truncated,
            depth_limited=found.depth_cut > 0,
            time_limited=bool(found.timed_out),
            rules_limited=bool(budget.refused),
            tracked=len(git_view.tracked),
            stats=stats,
        )
        if plan.record_stamps and not found.cancelled and not found.timed_out:
            self._store(plan, result, found.stamps, started_ns, watcher, generation)
        return result

    def _store(
        self,
        plan: Plan,
        result: DiscoveryResult,
        stamps: list[tuple[str, int]],
        started_ns: int,
        watcher: Watcher | None,
        generation: int,
    ) -> None:
        """Cache a complete scan, trusted by mtimes only if none was racy."""
        trust = all(mtime < started_ns - self._racy_ns for _, mtime in stamps)
        cached = result._replace(from_cache=True)
        with self._lock:
            self._cache[plan.key] = _CacheEntry(cached, stamps, trust, watcher, generation)
            self._cache.move_to_end(plan.key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)


def _add_notes(plan: Plan, found: Walk, git_view: GitView, budget: Budget) -> None:
    """What the user must know about a scan that did not list everything."""
    if git_view.problem is not None:
        found.notes.append(
            DiscoveryNote(kind="git_unavailable", path=".", message=git_view.problem)
        )
    if found.hidden_root:
        found.notes.append(
            DiscoveryNote(
                kind="ignored_root",
                path=".",
                message=f"{found.hidden_root}/ is hidden by a .ollmignore rule: "
                "nothing under it is listed",
            )
        )
    elif found.ignored_root:
        found.notes.append(
            DiscoveryNote(
                kind="ignored_root",
                path=".",
                message=f"{found.ignored_root}/ is ignored (by a .gitignore, "
                ".git/info/exclude, your global excludes file or the built-in ignores): "
                "only the files git tracks under it are listed, as `git ls-files` does",
            )
        )
    for source in budget.refused:
        shown = _shown_path(plan.root, source)
        left_out = (
            "nothing" if os.path.basename(source) == OLLMIGNORE else "nothing git does not track"
        )
        found.notes.append(
            DiscoveryNote(
                kind="rules_limit",
                path=shown,
                message=f"{shown} holds more ignore rules than a scan keeps "
                f"({MAX_RULE_CHARS:,} characters, all ignore files together): {left_out} "
                "is listed below its directory; the listing is incomplete: split it or "
                "use fewer, broader patterns",
            )
        )
    if found.timed_out:
        slow_rules = _shown_path(plan.root, found.slow_rules)
        found.notes.append(time_note(plan, found.timed_out, slow_rules))
        logger.warning(
            "file discovery under %s stopped after %g s; %d directories not listed",
            plan.root,
            plan.time_s,
            len(found.timed_out),
        )
    if found.depth_cut:
        found.notes.append(
            DiscoveryNote(
                kind="depth_limit",
                path=".",
                message=f"{found.depth_cut} directories below depth {plan.max_depth} were "
                "not listed (services.fileDiscovery.maxDepth, `ollm files --depth`)",
            )
        )
    if found.truncated:
        logger.warning("file discovery under %s stopped at %d files", plan.root, plan.max_files)


def _shown_path(root: str, path: str) -> str:
    """``path`` relative to the scan root when it is under it, else as it is."""
    if path and _under(path, root) and path != root:
        return path[len(root.rstrip("/")) + 1 :]
    return path


def _under(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor.rstrip("/") + "/")


def _stamps_unchanged(stamps: list[tuple[str, int]]) -> bool:
    return all(mtime_ns(path) == mtime for path, mtime in stamps)
