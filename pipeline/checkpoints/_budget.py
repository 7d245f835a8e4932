"""What one session's checkpoint folder takes on disk, against ``checkpoints.maxMb``.

The folder is charged by **allocated size** (``st_blocks``), not by the bytes its
files hold: a 20-byte blob costs a whole block of its file system (4 KiB on
ext4), a folder its own blocks, the log and the baseline what they take.
Everything in the folder counts but what is inside ``layers/``: the overlays of
commands still running, which hold those commands' new files until they reach
the workspace (the folder itself counts).

Three limits share the budget, so that what is kept can always be named:

- :data:`CONTENTS` (blobs, the baseline) may fill 7/8 of it;
- :data:`NAMES` (the log's lines naming a changed path) may fill it but for a
  reserve of 1/64;
- :data:`NOTES`: the reserve, for the one line per tool call that says how many
  paths it changed were not recorded. Such a line is always written: once the
  reserve is spent too, each of them takes the folder a line past the budget.

The folder is walked once (the first time :attr:`StoreBudget.used` is read); then
each write is charged as it is made (:meth:`StoreBudget.track`).

Example::

    budget = StoreBudget(folder, max_bytes=512 * 2**20)
    if budget.allows(budget.blocks(len(data)), CONTENTS):
        ...                                 # write the file
        budget.track(path)                  # and charge what it took
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal

Share = Literal["contents", "names", "notes"]
CONTENTS: Share = "contents"
NAMES: Share = "names"
NOTES: Share = "notes"

LAYERS = "layers"
"""The running commands' overlays: what is in it is not charged (see the module)."""


def allocated(st: os.stat_result) -> int:
    """The bytes a file or folder takes on disk (its blocks, not its length)."""
    return st.st_blocks * 512


class StoreBudget:
    """The allocated bytes of one checkpoint folder, and what ``maxMb`` leaves of it."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self._used: int | None = None
        self._known: dict[str, int] = {}
        """What each tracked path took when last seen (folders, the log, the baseline)."""
        self._block: int | None = None

    @property
    def used(self) -> int:
        """Bytes the folder takes on disk now (walked once, then kept up to date)."""
        if self._used is None:
            self._used = self._walk()
        return self._used

    def _walk(self) -> int:
        top = str(self.folder)
        total = 0
        pending = [top]
        while pending:
            folder = pending.pop()
            try:
                total += self._remember(folder)
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        if folder == top and entry.name == LAYERS:
                            total += self._remember(entry.path)  # itself, not what it holds
                        else:
                            pending.append(entry.path)
                    elif folder == top:  # the log, the baseline: they change
                        total += self._remember(entry.path)
                    else:  # a blob: never changed once written
                        total += allocated(entry.stat(follow_symlinks=False))
        return total

    def _remember(self, path: str) -> int:
        self._known[path] = allocated(os.lstat(path))
        return self._known[path]

    def limit(self, share: Share) -> int:
        """The most the folder may take while writing for ``share`` (see the module)."""
        if share == CONTENTS:
            return self.max_bytes - self.max_bytes // 8
        if share == NAMES:
            return self.max_bytes - self.max_bytes // 64
        return self.max_bytes

    def allows(self, extra: int, share: Share) -> bool:
        """Whether ``extra`` more allocated bytes stay within ``share``'s limit."""
        return self.used + extra <= self.limit(share)

    @property
    def block(self) -> int:
        """The file system's block: the least a file with content takes."""
        if self._block is None:
            where = self.folder
            while not where.exists() and where != where.parent:
                where = where.parent
            try:
                self._block = os.statvfs(where).f_bsize or 4096
            except OSError:
                self._block = 4096
        return self._block

    def blocks(self, size: int) -> int:
        """What a file of ``size`` bytes takes on disk (whole blocks)."""
        return -(-size // self.block) * self.block

    def appendable(self, path: Path, sizes: list[int], share: Share) -> int:
        """How many of the lines of ``sizes`` bytes, in order, can be appended to the
        file ``path`` while the folder stays within ``share``'s limit."""
        try:
            length = os.lstat(path).st_size
        except FileNotFoundError:
            length = 0
        now = self._known.get(str(path), self.blocks(length))
        room = self.limit(share) - self.used + now
        fitting = 0
        for size in sizes:
            length += size
            if self.blocks(length) > room:
                break
            fitting += 1
        return fitting

    def replaceable(self, path: Path, size: int, share: Share) -> bool:
        """Whether replacing the file ``path`` by one of ``size`` bytes keeps the folder
        within ``share``'s limit."""
        used = self.used
        now = self._known.get(str(path), 0)
        return used - now + self.blocks(size) <= self.limit(share)

    def track(self, path: Path | str) -> None:
        """Charge what ``path`` takes now beyond what it took when last tracked (all of
        it for a new file)."""
        key = str(path)
        try:
            now = allocated(os.lstat(key))
        except FileNotFoundError:
            now = 0
        before = self._known.get(key, 0)
        self._known[key] = now
        if self._used is not None:
            self._used += now - before

    def charge_new(self, path: Path | str) -> None:
        """Charge a new file that will not change again (a blob): not remembered."""
        if self._used is not None:
            with contextlib.suppress(FileNotFoundError):
                self._used += allocated(os.lstat(path))
