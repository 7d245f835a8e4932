"""cgroups of one run: a ``pids`` cgroup (the process limit root is not bound by)
and a ``memory`` cgroup (the whole call's memory, its ``/tmp`` included).

Each is made under the cgroup this process is in, in the cgroup v1 hierarchy of
its controller or in cgroup v2 where the controller is delegated; ``parent()`` is
``None`` where the host does not let us.

Example::

    parent = PidsCgroup.parent()
    if parent is not None:
        cgroup = PidsCgroup(parent, max_pids=64)
        ...                                  # echo PID > cgroup.path / "cgroup.procs"
        cgroup.hit_limit(); cgroup.remove()
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import threading
import time
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)

REAP_TIMEOUT_S = 5.0
"""How long a cgroup's (or a process group's) last processes may take to die."""


class PidsCgroup:
    """A ``pids`` cgroup of its own for one run, with ``pids.max`` set.

    Made under the cgroup this process is in, in the cgroup v1 ``pids``
    hierarchy or in cgroup v2 where the ``pids`` controller is delegated.
    :meth:`parent` is ``None`` where the host does not let us (the common
    case for a normal user); then ``RLIMIT_NPROC`` alone bounds processes.
    """

    _parent: Path | None = None
    _checked = False
    _lock = threading.Lock()

    def __init__(self, parent: Path, max_pids: int) -> None:
        self.path = parent / f"ollm-sandbox-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise

    @classmethod
    def parent(cls) -> Path | None:
        """The directory runs' cgroups are made in, or ``None`` (checked once)."""
        with cls._lock:
            if not cls._checked:
                cls._parent = cls._find_parent()
                cls._checked = True
            return cls._parent

    @classmethod
    def _find_parent(cls) -> Path | None:
        for candidate in cls._candidates():
            try:
                probe = cls(candidate, 1)
            except OSError:
                continue
            probe.remove()
            return candidate
        return None

    @staticmethod
    def _candidates() -> list[Path]:
        try:
            memberships = Path("/proc/self/cgroup").read_text()
            mounts = Path("/proc/self/mountinfo").read_text()
        except OSError:  # pragma: no cover - /proc is always there on Linux
            return []
        return cgroup_candidates(memberships, mounts)

    def hit_limit(self) -> bool:
        """Whether a fork was refused for want of room (``pids.events``)."""
        try:
            events = (self.path / "pids.events").read_text().split()
        except OSError:  # pragma: no cover - the directory is ours until remove()
            return False
        return len(events) >= 2 and events[0] == "max" and events[1] != "0"

    def kill_all(self) -> None:
        """SIGKILL every process left in the cgroup and wait until it is empty."""
        deadline = time.monotonic() + REAP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:  # pragma: no cover - the directory is ours until remove()
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)
        logger.warning(
            "sandbox: processes still in %s after SIGKILL", self.path
        )  # pragma: no cover

    def remove(self) -> None:
        """Kill what is left and remove the cgroup."""
        self.kill_all()
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:  # pragma: no cover
                return
            except OSError:  # pragma: no cover - busy while the last exits are reaped
                time.sleep(0.01)
        logger.warning("sandbox: could not remove cgroup %s", self.path)  # pragma: no cover


def cgroup_candidates(memberships: str, mounts: str, controller: str = "pids") -> list[Path]:
    """Where a ``controller`` (``pids``, ``memory``) cgroup could be made for this process.

    ``memberships`` is the text of ``/proc/self/cgroup``, ``mounts`` that of
    ``/proc/self/mountinfo``: the cgroup v1 hierarchy of the controller, and the
    cgroup v2 directory of this process where the controller is delegated.
    """
    v1_path = v2_path = None
    for line in memberships.splitlines():
        number, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            v1_path = path
        elif number == "0" and controllers == "":
            v2_path = path
    found: list[Path] = []
    for line in mounts.splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        root, mount_point, fstype = fields[3], fields[4], extra[0]
        if fstype == "cgroup" and v1_path and controller in extra[2].split(","):
            found.append(join_cgroup(mount_point, root, v1_path))
        elif fstype == "cgroup2" and v2_path is not None:
            directory = join_cgroup(mount_point, root, v2_path)
            subtree = directory / "cgroup.subtree_control"
            if subtree.exists() and controller in subtree.read_text().split():
                found.append(directory)
    return found


def join_cgroup(mount_point: str, root: str, path: str) -> Path:
    relative = path
    if root != "/" and (path == root or path.startswith(root + "/")):
        relative = path[len(root) :]
    return Path(mount_point) / relative.lstrip("/")


class MemoryCgroup:
    """A memory cgroup of its own for one run: the whole call (every process, and the
    pages of its ``/tmp``) gets ``tools.sandbox.memoryMb``.

    Made in the cgroup v1 ``memory`` hierarchy or in cgroup v2 where the
    ``memory`` controller is delegated; :meth:`parent` is ``None`` elsewhere,
    and then ``RLIMIT_AS`` (per process) is the only memory limit.
    """

    _parent: Path | None = None
    _checked = False
    _lock = threading.Lock()

    def __init__(self, parent: Path, limit_bytes: int) -> None:
        self.path = parent / f"ollm-sandbox-mem-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        self.v2 = (self.path / "memory.max").exists()
        try:
            if self.v2:
                (self.path / "memory.max").write_text(str(limit_bytes))
                with contextlib.suppress(OSError):
                    (self.path / "memory.swap.max").write_text("0")
            else:
                (self.path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        except OSError:
            self.path.rmdir()
            raise

    @classmethod
    def parent(cls) -> Path | None:
        """The directory runs' memory cgroups are made in, or ``None`` (checked once)."""
        with cls._lock:
            if not cls._checked:
                cls._parent = cls._find_parent()
                cls._checked = True
            return cls._parent

    @classmethod
    def _find_parent(cls) -> Path | None:
        try:
            memberships = Path("/proc/self/cgroup").read_text()
            mounts = Path("/proc/self/mountinfo").read_text()
        except OSError:  # pragma: no cover - /proc is always there on Linux
            return None
        for candidate in memory_cgroup_candidates(memberships, mounts):
            try:
                probe = cls(candidate, 64 * 1024 * 1024)
            except OSError:
                continue
            probe.remove()
            return candidate
        return None

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for want of memory."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            fields = (self.path / name).read_text().split()
        except OSError:  # pragma: no cover
            return False
        return any(key == "oom_kill" and value != "0" for key, value in itertools.pairwise(fields))

    def remove(self) -> None:
        """Kill what is left and remove the cgroup."""
        deadline = time.monotonic() + REAP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001)
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:  # pragma: no cover
                return
            except OSError:  # pragma: no cover - busy while the last exits are reaped
                time.sleep(0.01)
        logger.warning("sandbox: could not remove cgroup %s", self.path)  # pragma: no cover


def memory_cgroup_candidates(memberships: str, mounts: str) -> list[Path]:
    """Where a memory cgroup could be made for this process (see :func:`cgroup_candidates`)."""
    return cgroup_candidates(memberships, mounts, "memory")
