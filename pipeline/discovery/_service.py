"""FileDiscoveryService: the project files a model may see (Requirement 6).

A walker of our own on ``os.scandir`` that decides about each entry as it
meets it, with git's ignore semantics (:mod:`ollm_cli.pipeline.discovery._ignore_rules`), and never
enters a directory that is ignored. Results are cached per root and options and
revalidated by the modification times of the directories walked (one ``stat``
per directory, none per file), or by a watcher on the root when one runs.

Inside a git work tree the listing equals ``git ls-files --cached --others
--exclude-standard``, less the built-in ignores of untracked content:

- files git tracks are always listed, whatever the ignore rules say (only a
  ``.ollmignore`` rule hides them): the index is read with ``git ls-files -z
  --cached`` when it exists (run so that nothing the repository's own config
  names can run: :mod:`ollm_cli.pipeline.discovery._git`), and an ignored
  directory holding tracked files is entered for those files only;
- a nested repository (a directory with its own ``.git``) is one entry,
  ``name/``, and is not walked into; a submodule is one entry, ``name``;
- only regular files and symbolic links are listed (no FIFOs, sockets, devices);
- the user's global excludes file (``core.excludesFile``) applies.

Outside a work tree (or without git installed) it is the scan alone.

Depth: files directly in the root are at depth 0, files in ``root/a`` at depth
1; ``max_depth=N`` lists files down to depth ``N`` (``fd --max-depth N+1``).
When the limit leaves directories out, the result says so (a ``depth_limit``
note and ``depth_limited``).

Time: a scan walks for at most ``scanTimeS`` (10 s); one that runs out stops
with a ``time_limit`` note naming the directories it did not list (and
``time_limited``), and is not cached.

Example::

    service = FileDiscoveryService()
    result = service.scan(DiscoveryOptions(root=Path("."), max_depth=4))
    result.files                 # ("README.md", "src/app.py", ...) sorted like git
    result.notes                 # unreadable directories, cap reached, symlink loops
    handle = service.watch_changes(Path("."), lambda event, path: print(event, path))
    handle.dispose()

``scan`` is synchronous and thread-safe (tools call it from worker threads);
``discover`` streams :class:`FileEntry` objects to async code and
``discover_all`` awaits the whole :class:`DiscoveryResult`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ollm_cli.config.settings import FileDiscoverySettings
from ollm_cli.pipeline.discovery._git import GitView, read_git
from ollm_cli.pipeline.discovery._ignore_rules import (
    GITIGNORE,
    IGNORED_BY_OLLM,
    KEPT,
    OLLMIGNORE,
    IgnoreStack,
    IgnoreTree,
    NeverMatchesError,
    RuleSet,
    builtin_rules,
    log_symlinked_gitignore,
    parse_rule,
    root_stack,
)
from ollm_cli.pipeline.errors import ToolError

logger = logging.getLogger(__name__)

ChangeEvent = Literal["add", "change", "unlink"]
EntryKind = Literal["file", "directory", "symlink"]
ChangeCallback = Callable[[ChangeEvent, str], None]

# A directory modified this close to the start of a scan may change again within
# the same filesystem timestamp tick; such a scan is not trusted by mtimes alone.
_RACY_S = 0.25
_MISSING = -1


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
        return _make_entry(self.root, relative, kind, with_stats)


def _make_entry(root: str, relative: str, kind: EntryKind, with_stats: bool) -> FileEntry:
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


class Disposable:
    """A running watch; :meth:`dispose` stops it (twice is harmless)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop: Callable[[], None] | None = stop

    def dispose(self) -> None:
        """Stop watching."""
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()


@dataclass(frozen=True)
class _Plan:
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
class _Walk:
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


@dataclass
class _CacheEntry:
    result: DiscoveryResult
    stamps: list[tuple[str, int]]
    trust_stamps: bool
    watcher: _Watcher | None
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


class _Watcher:
    """One watchfiles thread on one root, shared by every callback on that root."""

    def __init__(self, root: str, tree: IgnoreTree, debounce_ms: int, step_ms: int) -> None:
        self.root = root
        self.tree = tree
        self.generation = 0
        self.alive = True
        self._callbacks: dict[int, ChangeCallback] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._thread = threading.Thread(target=self._run, name="ollm-file-watch", daemon=True)
        self._index = os.path.join(root, ".git", "index")

    def start(self, timeout_s: float) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):  # pragma: no cover - inotify setup hangs
            logger.warning("file watcher on %s is slow to start; changes may be missed", self.root)

    def add(self, callback: ChangeCallback) -> int:
        with self._lock:
            self._next_id += 1
            self._callbacks[self._next_id] = callback
            return self._next_id

    def remove(self, token: int) -> bool:
        """Drop a callback; ``True`` when none is left."""
        with self._lock:
            self._callbacks.pop(token, None)
            return not self._callbacks

    @property
    def running(self) -> bool:
        """Whether its thread still runs: once it has ended no callback can be called."""
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)
        self.alive = False

    def _run(self) -> None:
        from watchfiles import watch

        try:
            for changes in watch(
                self.root,
                watch_filter=None,
                debounce=self._debounce_ms,
                step=self._step_ms,
                stop_event=self._stop,
                rust_timeout=max(self._step_ms * 5, 50),
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self._ready.set()
                if changes:
                    self.generation += 1
                    self._dispatch({(int(change), path) for change, path in changes})
        except Exception as error:  # pragma: no cover - the watched root vanished, inotify limits
            logger.warning("file watcher on %s stopped: %s", self.root, type(error).__name__)
        finally:
            self.alive = False
            self._ready.set()

    def _dispatch(self, changes: set[tuple[int, str]]) -> None:
        if any(os.path.basename(path) in (GITIGNORE, OLLMIGNORE) for _, path in changes):
            self.tree.refresh()
        if any(path == self._index for _, path in changes):
            # git add / rm: what is tracked (and so reported although ignored) changed
            self.tree.tracked = read_git(self.root).tracked
        events: set[tuple[str, ChangeEvent]] = set()
        for change, path in changes:
            events.update(self._events_for(change, path))
        with self._lock:
            callbacks = list(self._callbacks.values())
        kinds = {"add": 0, "change": 1, "unlink": 2}
        for relative, event in sorted(events, key=lambda item: (item[0], kinds[item[1]])):
            for callback in callbacks:
                try:
                    callback(event, relative)
                except Exception:
                    logger.exception("a file-change callback failed on %s", relative)

    def _events_for(self, change: int, path: str) -> list[tuple[str, ChangeEvent]]:
        relative = os.path.relpath(path, self.root).replace(os.sep, "/")
        if relative == "." or relative.startswith("../"):  # pragma: no cover - the root itself
            return []
        if change == 3:  # deleted: whether it was a directory is unknown now
            if self.tree.should_ignore(relative, False) or self.tree.should_ignore(relative, True):
                return []
            return [(relative, "unlink")]
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:  # pragma: no cover - gone again before we looked (reported as unlink)
            return []
        if self.tree.should_ignore(relative, is_dir):
            return []
        if not is_dir:
            return [(relative, "add" if change == 1 else "change")]
        if change != 1:
            return []
        return [(inner, "add") for inner in self._files_under(relative)]

    def _files_under(self, relative: str) -> list[str]:
        """The files of a directory that appeared (moved in, or created with contents)."""
        found: list[str] = []
        for current, dirs, files in os.walk(os.path.join(self.root, relative)):
            rel_dir = os.path.relpath(current, self.root).replace(os.sep, "/")
            dirs[:] = [d for d in dirs if not self.tree.should_ignore(f"{rel_dir}/{d}", True)]
            found.extend(
                f"{rel_dir}/{name}"
                for name in files
                if not self.tree.should_ignore(f"{rel_dir}/{name}", False)
            )
        return found


class FileDiscoveryService:
    """Scans project trees with git's ignore rules, caches the results and watches roots.

    One instance serves any number of roots. ``settings`` is
    ``services.fileDiscovery`` (defaults when omitted). A scan is trusted by
    directory mtimes only if none was modified within ``racy_window_s`` of its
    start (a later change could share the timestamp); a running watcher on the
    root is trusted instead, as long as it reported nothing since the scan began
    (its reports lag changes by about ``watch_step_ms``).
    """

    def __init__(
        self,
        settings: FileDiscoverySettings | None = None,
        *,
        cache_size: int = 32,
        watch_debounce_ms: int = 200,
        watch_step_ms: int = 10,
        racy_window_s: float = _RACY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or FileDiscoverySettings()
        self._builtin = builtin_rules(self.settings.builtin_ignores)
        self._cache: OrderedDict[tuple[object, ...], _CacheEntry] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._watchers: dict[str, _Watcher] = {}
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
                    yield _make_entry(plan.root, relative, kind, False)
            await future
        finally:
            cancel.set()

    async def discover_all(self, options: DiscoveryOptions) -> DiscoveryResult:
        """The whole result of :meth:`scan`, without blocking the event loop."""
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
                watcher = _Watcher(resolved, tree, self._watch_debounce_ms, self._watch_step_ms)
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

    def _plan(self, options: DiscoveryOptions) -> _Plan:
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
        return _Plan(
            root=root,
            max_depth=max_depth,
            follow_symlinks=follow,
            max_files=max_files,
            time_s=settings.scan_time_s,
            include=_compile_globs(options.include_patterns, "include"),
            exclude=_compile_globs(options.exclude_patterns, "exclude"),
            builtin=builtin,
            key=key,
        )

    def _watcher_for(self, root: str) -> _Watcher | None:
        for watched, watcher in self._watchers.items():
            if watcher.alive and _under(root, watched):
                return watcher
        return None

    def _lookup(self, plan: _Plan) -> DiscoveryResult | None:
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
        plan: _Plan,
        on_batch: Callable[[list[tuple[str, EntryKind]]], None] | None,
        cancel: threading.Event | None,
    ) -> DiscoveryResult:
        started_ns = time.time_ns()
        started = time.perf_counter()
        deadline = self._clock() + plan.time_s
        with self._lock:
            watcher = None if plan.follow_symlinks else self._watcher_for(plan.root)
            generation = watcher.generation if watcher is not None else 0
        git_view = read_git(plan.root)
        stack, consulted = root_stack(plan.root, self._builtin, git_view.excludes_file)
        walk = _walk(plan, stack, git_view, on_batch, cancel, _Deadline(self._clock, deadline))
        walk.stamps.extend((path, _mtime_ns(path)) for path in (*consulted, *git_view.consulted))
        walk.files.sort()
        if git_view.problem is not None:
            walk.notes.append(
                DiscoveryNote(kind="git_unavailable", path=".", message=git_view.problem)
            )
        if walk.timed_out:
            walk.notes.append(_time_note(plan, walk.timed_out))
            logger.warning(
                "file discovery under %s stopped after %g s; %d directories not listed",
                plan.root,
                plan.time_s,
                len(walk.timed_out),
            )
        if walk.depth_cut:
            walk.notes.append(
                DiscoveryNote(
                    kind="depth_limit",
                    path=".",
                    message=f"{walk.depth_cut} directories below depth {plan.max_depth} were "
                    "not listed (services.fileDiscovery.maxDepth, `ollm files --depth`)",
                )
            )
        stats = ScanStats(
            directories_scanned=walk.stats["dirs"],
            directories_ignored=walk.stats["dirs_ignored"],
            files_ignored=walk.stats["files_ignored"],
            ignore_files=walk.stats["ignore_files"] + len(stack.git) + len(stack.ollm),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )
        result = DiscoveryResult(
            root=plan.root,
            files=tuple(walk.files),
            symlinks=frozenset(walk.symlinks),
            repositories=frozenset(walk.repositories),
            notes=tuple(walk.notes),
            truncated=walk.truncated,
            depth_limited=walk.depth_cut > 0,
            time_limited=bool(walk.timed_out),
            tracked=len(git_view.tracked),
            stats=stats,
        )
        if walk.truncated:
            logger.warning("file discovery under %s stopped at %d files", plan.root, plan.max_files)
        if not walk.cancelled and not walk.timed_out:
            trust = all(mtime < started_ns - self._racy_ns for _, mtime in walk.stamps)
            cached = result.model_copy(update={"from_cache": True})
            with self._lock:
                self._cache[plan.key] = _CacheEntry(cached, walk.stamps, trust, watcher, generation)
                self._cache.move_to_end(plan.key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return result


def _under(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor.rstrip("/") + "/")


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return _MISSING


def _stamps_unchanged(stamps: list[tuple[str, int]]) -> bool:
    return all(_mtime_ns(path) == mtime for path, mtime in stamps)


# (absolute dir, relative dir, depth, rules, ancestors' (dev, inode), tracked files only)
_Pending = tuple[str, str, int, IgnoreStack, tuple[tuple[int, int], ...], bool]


def _walk(
    plan: _Plan,
    root_rules: IgnoreStack,
    git_view: GitView,
    on_batch: Callable[[list[tuple[str, EntryKind]]], None] | None,
    cancel: threading.Event | None,
    deadline: _Deadline,
) -> _Walk:
    """Walk ``plan.root`` depth first, pruning ignored directories as it goes,
    until ``deadline`` passes (then the directories not yet listed are named).

    An ignored directory that holds files git tracks is entered in *tracked-only*
    mode: there, and below, only tracked files are listed, as git does.
    """
    walk = _Walk(
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
                    stamps.append((path, _mtime_ns(path)))
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
class _Deadline:
    clock: Callable[[], float]
    at: float

    def passed(self) -> bool:
        return self.clock() >= self.at


#: How many of the directories a timed-out scan left out its note names.
_NAMED_CUT = 5


def _time_note(plan: _Plan, left_out: list[str]) -> DiscoveryNote:
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


def _cap(walk: _Walk, plan: _Plan, rel_dir: str) -> None:
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
