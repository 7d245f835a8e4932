"""The watcher of one root: a watchfiles thread whose changes become ``add``,
``change`` and ``unlink`` events for the paths discovery would list.

Example::

    watcher = Watcher(root, IgnoreTree(root, builtin_rules(()), None, tracked), 200, 10)
    watcher.start(timeout_s=10)
    token = watcher.add(lambda event, path: print(event, path))
    watcher.stop()
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable

from ollm_cli.pipeline.discovery._git import read_git
from ollm_cli.pipeline.discovery._ignore_rules import GITIGNORE, OLLMIGNORE, IgnoreTree
from ollm_cli.pipeline.discovery._log import LazyLogger
from ollm_cli.pipeline.discovery._models import ChangeCallback, ChangeEvent

logger = LazyLogger(__name__)


class Disposable:
    """A running watch; :meth:`dispose` stops it (twice is harmless)."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop: Callable[[], None] | None = stop

    def dispose(self) -> None:
        """Stop watching."""
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()


class Watcher:
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
