"""Directories listed ahead of the walk, while git reads the index.

The walk cannot decide about an entry before it knows what git tracks, and ``git
ls-files`` takes as long as listing a few hundred directories. So while it runs,
:class:`Listings` lists directories (breadth first from the root, one per
:meth:`Listings.step`), and the walk takes each listing from here instead of
reading the directory again. It decides nothing: it only skips what the root's
rules ignore (``target/``) and, below, the built-in names (``node_modules``),
``.git`` and symbolic links, so the directories it lists in vain are few, and only as many as git's
run leaves time for; whatever it did not list, the walk lists itself. When the scan's
time runs out while the root's rules decide, it stops listing (the walk says so).

Example::

    ahead = Listings("/src/app", stack, max_depth=64)
    while git_is_running() and ahead.step():
        pass
    ahead.take("/src/app")   # the root's entries, listed once
"""

from __future__ import annotations

import os
from collections import deque

from ollm_cli.pipeline.discovery._budget import OutOfTime
from ollm_cli.pipeline.discovery._ignore_rules import IGNORED, KEPT, IgnoreStack


class Listings:
    """The entries of directories under ``root``, listed before the walk asks."""

    __slots__ = ("_builtin_rules", "_listed", "_max_depth", "_pending", "_verdict")

    def __init__(self, root: str, rules: IgnoreStack, max_depth: int) -> None:
        self._listed: dict[str, list[os.DirEntry[str]]] = {}
        self._pending: deque[tuple[str, int]] = deque([(root, 0)])
        self._verdict = rules.for_directory("").verdict
        self._builtin_rules = rules.builtin
        self._max_depth = max_depth

    def __len__(self) -> int:
        return len(self._listed)

    def step(self) -> bool:
        """List one more directory; ``False`` when none is left to list."""
        if not self._pending:
            return False
        directory, depth = self._pending.popleft()
        try:
            with os.scandir(directory) as iterator:
                entries = list(iterator)
        except OSError:
            return True  # the walk reads it again, and says why it cannot
        self._listed[directory] = entries
        if depth < self._max_depth:
            # The root's rules decide about the root's entries; below, only the
            # built-in names are skipped (asking every rule twice, here and in the
            # walk, would cost what listing ahead saves).
            verdict = self._verdict if depth == 0 else self._builtin
            pending = self._pending
            for entry in entries:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:  # pragma: no cover - is_dir() swallows all but rare errors
                    continue
                name = entry.name
                try:
                    if name != ".git" and verdict(name, True) == KEPT:
                        pending.append((entry.path, depth + 1))
                except OutOfTime:
                    pending.clear()  # the walk stops at its first directory
                    return False
        return True

    def _builtin(self, name: str, is_dir: bool) -> int:
        return KEPT if self._builtin_rules.match(name, name, is_dir) is not True else IGNORED

    def take(self, directory: str) -> list[os.DirEntry[str]] | None:
        """The entries listed ahead for ``directory`` (once), or ``None``."""
        return self._listed.pop(directory, None)
