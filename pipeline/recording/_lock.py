"""The writer lock of one session: an OS lock that names the process holding it.

Only one process at a time may write a session. The lock is ``flock`` on a
small file holding the holder's pid, so a second writer is refused with an
error that says which process to close. The kernel drops the lock when the
holder dies, so a crash never leaves a session locked. Readers never take it.

The lock file is removed on release. To make that safe, an acquirer checks
after locking that the path still names the file it locked (a releaser may
have unlinked it in between) and retries if not.

Example::

    lock = SessionLock.acquire(folder / f"{session_id}.lock", session_id)
    ...
    lock.release()
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from pathlib import Path

from ollm_cli.pipeline.errors import SessionLockedError, StorageError

logger = logging.getLogger(__name__)

_MAX_ATTEMPTS = 50


class SessionLock:
    """A held writer lock; :meth:`release` gives it up (the process dying does too)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> SessionLock:
        """Take the lock at ``path`` or raise :class:`SessionLockedError` naming its holder."""
        for _ in range(_MAX_ATTEMPTS):
            fd = _open_lock_file(path, session_id)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                os.close(fd)
                raise SessionLockedError(
                    f"session {session_id} is being written by {describe_process(holder)}",
                    hint="close the other ollm using it (or wait for it to finish); "
                    "listing, viewing and exporting still work meanwhile",
                ) from None
            if _same_file(fd, path):
                try:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                except OSError as exc:  # the lock holds anyway; only the pid is not shown
                    logger.warning("cannot note our pid in %s: %s", path.name, exc.strerror)
                return cls(path, fd)
            os.close(fd)  # the previous holder removed the file meanwhile: start again
        raise StorageError(  # pragma: no cover - needs a lock file recreated 50 times in a row
            f"could not take the lock of session {session_id}: its lock file keeps changing",
            hint="try again",
        )

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and give the lock up (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(fd)


def lock_holder(path: Path) -> int | None:
    """The pid holding the lock at ``path`` (0 if unknown), or None when it is free."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid(fd) or 0
    finally:
        os.close(fd)
    return None


def describe_process(pid: int | None) -> str:
    """``process 1234 (python3)``, ``this process (1234)`` or ``another process``."""
    if not pid:
        return "another process"
    if pid == os.getpid():
        return f"this process ({pid})"
    try:
        name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    return f"process {pid} ({name})" if name else f"process {pid}"


def _open_lock_file(path: Path, session_id: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        reason = errno.errorcode.get(exc.errno or 0, "error")
        logger.error("cannot create the lock file of session %s: %s", session_id, reason)
        raise StorageError(
            f"cannot lock session {session_id}: {exc.strerror or reason} in {path.parent}",
            hint="check that the sessions folder is writable (services.session.dataDir)",
        ) from None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:  # pragma: no cover - reading a file we just opened
        return None
    return int(text) if text.isdigit() else None


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (on_disk.st_dev, on_disk.st_ino)
