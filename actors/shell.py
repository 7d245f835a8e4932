"""What every actor shell answers: a liveness ping, its memory use, and close."""

from __future__ import annotations

import os

import psutil


class ShellBase:
    """Base of the actor shells: ``ping`` and ``memory_rss`` for the runtime and harnesses."""

    def ping(self) -> int:
        """The shell's process id (proves the actor is alive and says which process it is)."""
        return os.getpid()

    def memory_rss(self) -> int:
        """Resident memory of this shell's process, in bytes."""
        return int(psutil.Process(os.getpid()).memory_info().rss)

    def close(self) -> None:
        """Release what the shell holds (its service saves and closes); nothing by default."""

    def open_files(self) -> int:
        """Open file descriptors of this shell's process."""
        return len(psutil.Process(os.getpid()).open_files())
