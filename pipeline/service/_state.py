"""The local OLLM service's files under ``OLLM_HOME/service/``.

- ``state.json``: where the running service is (GCS address, namespace), the
  daemon's pid and start time, the version of OLLM it runs, when it started.
  Written atomically by the daemon once the service answers; removed when it
  stops. A file whose daemon is gone is *stale* and is cleaned up by the next
  command.
- ``token``: Ray's authentication token for this service, mode 0600. Only a
  process that can read it can reach the service's actors.
- ``service.log``: everything the daemon and Ray print.
- ``ollm.sock``: the daemon's Unix socket (mode 0600), where commands reach their
  conversations (:mod:`ollm_cli.pipeline.service._socket`); replaced by each new daemon.
- ``start.lock``: ``flock``-ed while a command finds or starts the service, so
  two commands started at once get one service.

Every ``OLLM_HOME`` gets its own files, its own Ray cluster, namespace and token.

Example::

    paths = ServicePaths.for_home(ollm_home())
    state = read_state(paths)
    if state is not None and state.alive():
        print(state.address)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ollm_cli.config.paths import ensure_private_dir, ollm_home
from ollm_cli.pipeline.atomic_file import write_atomic

STATE_NAME = "state.json"
TOKEN_NAME = "token"
LOG_NAME = "service.log"
LOCK_NAME = "start.lock"
SOCKET_NAME = "ollm.sock"

CLUSTER_REFUSED = 3
"""The daemon's exit code when the Ray cluster it was to attach to refused it."""


class ServiceState(BaseModel):
    """What a client needs to find and trust the running service."""

    model_config = ConfigDict(defer_build=True)  # built when first used, not at import

    address: str
    namespace: str
    pid: int
    pgid: int
    pid_started: float
    version: str
    started_at: float
    home: str
    ray_temp: str = ""
    """The private folder of the service's Ray files (its sockets, logs)."""
    cluster: str | None = None
    """The Ray cluster this service's daemon is a driver of (``runtime.rayAddress``);
    ``None``: the Ray head is the daemon's own."""

    def alive(self) -> bool:
        """The daemon process that wrote this file still runs (the same process, not a
        new one that got its pid)."""
        return process_alive(self.pid, self.pid_started)


@dataclass(frozen=True)
class ServicePaths:
    """The service's files for one ``OLLM_HOME``."""

    home: Path
    folder: Path

    @classmethod
    def for_home(cls, home: Path | None = None, *, cluster: str | None = None) -> ServicePaths:
        """The files of the home's local service, or of its service attached to the Ray
        cluster at ``cluster`` (a folder of its own: another daemon, state and socket)."""
        root = (home or ollm_home()).expanduser().resolve()
        if cluster is None:
            return cls(home=root, folder=root / "service")
        digest = hashlib.sha256(cluster.encode()).hexdigest()[:12]
        return cls(home=root, folder=root / "service" / f"cluster-{digest}")

    @property
    def state(self) -> Path:
        return self.folder / STATE_NAME

    @property
    def token(self) -> Path:
        return self.folder / TOKEN_NAME

    @property
    def log(self) -> Path:
        return self.folder / LOG_NAME

    @property
    def socket(self) -> Path:
        """The daemon's Unix socket, where commands reach their conversations."""
        return self.folder / SOCKET_NAME

    @property
    def lock(self) -> Path:
        return self.folder / LOCK_NAME

    @property
    def namespace(self) -> str:
        """Ray namespace of this home's actors: the same home, the same namespace."""
        digest = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return f"ollm-{digest}"

    def ensure(self) -> None:
        ensure_private_dir(self.folder)


def process_started(pid: int) -> float | None:
    """When process ``pid`` was created, in seconds since the epoch (psutil's
    ``create_time``, to the same value), or ``None`` when it does not run or is a
    zombie. Read from ``/proc`` rather than through psutil, whose import costs a
    thin client more than the whole check."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        boot = _boot_time()
    except (OSError, ValueError):
        return None
    # after the command name (which may hold spaces and parentheses): the state,
    # then field 22 of proc(5), the start time in clock ticks after boot
    fields = stat[stat.rindex(b")") + 2 :].split()
    if fields[0] == b"Z":
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


@lru_cache(maxsize=1)
def _boot_time() -> float:
    for line in Path("/proc/stat").read_bytes().splitlines():
        if line.startswith(b"btime "):
            return float(line.split()[1])
    raise ValueError("/proc/stat names no boot time")


def process_alive(pid: int, started: float | None = None) -> bool:
    """``pid`` runs (and, given ``started``, is the process created at that time)."""
    created = process_started(pid)
    return created is not None and (started is None or abs(created - started) < 1.0)


def read_state(paths: ServicePaths) -> ServiceState | None:
    """The state file, or ``None`` when there is none (or it is unreadable: stale)."""
    try:
        raw = paths.state.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return ServiceState.model_validate(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValidationError):
        return None


def write_state(paths: ServicePaths, state: ServiceState) -> None:
    paths.ensure()
    write_atomic(paths.state, orjson.dumps(state.model_dump(), option=orjson.OPT_INDENT_2))


def remove_state(paths: ServicePaths, pid: int | None = None) -> None:
    """Remove the state file (only if it still names ``pid``, when given)."""
    if pid is not None:
        current = read_state(paths)
        if current is not None and current.pid != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        paths.state.unlink()


def ensure_token(paths: ServicePaths) -> Path:
    """The token file, created with a new random token (mode 0600) when missing."""
    paths.ensure()
    path = paths.token
    if path.exists() and path.stat().st_size > 0:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return path
    write_atomic(path, secrets.token_hex(32).encode())
    return path


@contextlib.contextmanager
def start_lock(paths: ServicePaths, timeout_s: float = 120.0) -> Iterator[None]:
    """Hold the start lock: one command at a time finds or starts the service."""
    paths.ensure()
    fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    from ollm_cli.pipeline.errors import ServiceError

                    raise ServiceError(
                        "another command has been starting the OLLM service for too long",
                        hint="see `ollm service logs`; `ollm service stop` and try again",
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def ray_environment(paths: ServicePaths) -> dict[str, str]:
    """The variables a process needs to reach this home's service (and nothing else):
    token authentication with this home's token, every address on loopback."""
    return {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(paths.token),
        # Ray takes the node's address from the route to the internet unless told
        # the node is alone: then every server binds 127.0.0.1
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_DISABLE_IMPORT_WARNING": "1",
        # no task events (they feed the dashboard we do not run): a client that made
        # calls otherwise waits about 0.3 s at its exit to flush them
        "RAY_task_events_report_interval_ms": "0",
    }


SOURCE_PACKAGES = ("actors", "cli", "config", "pipeline")
"""The packages whose files :func:`code_version` digests."""


@lru_cache(maxsize=1)
def code_version() -> str:
    """The version of OLLM this process runs: the package version and a digest of its
    source files' names, sizes and times (:func:`source_digest`), so a changed
    checkout counts as another version."""
    root = Path(__file__).absolute().parents[2]  # the ollm_cli package
    return f"{_package_version(root)}+{source_digest(root)}"


def source_digest(root: Path, packages: tuple[str, ...] = SOURCE_PACKAGES) -> str:
    """A digest of the name, size and modification time of each ``.py`` file under
    ``root``'s ``packages``: another file, or one written since, gives another digest.

    A stat per file (about 230 of them, every command), walked with ``os.scandir``
    rather than ``Path.rglob`` (a third of the time: no path object per entry)."""
    entries: list[str] = []
    for package in packages:
        _collect(str(root / package), package, entries)
    digest = hashlib.sha256()
    for entry in sorted(entries):
        digest.update(entry.encode())
    return digest.hexdigest()[:10]


def _collect(folder: str, name: str, entries: list[str]) -> None:
    """Add ``name/...\0size\0mtime_ns\n`` for each ``.py`` file under ``folder``
    (links followed: an editable install links each file)."""
    with contextlib.suppress(OSError), os.scandir(folder) as found:
        for entry in found:
            with contextlib.suppress(OSError):
                if entry.is_dir():
                    _collect(entry.path, f"{name}/{entry.name}", entries)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    entries.append(f"{name}/{entry.name}\0{info.st_size}\0{info.st_mtime_ns}\n")


def _package_version(root: Path) -> str:
    try:
        from importlib.metadata import version

        return version("ollm-cli")
    except Exception:
        pass
    with contextlib.suppress(OSError):
        for line in (root / "pyproject.toml").read_text().splitlines():
            if line.startswith("version"):
                return line.split("=", 1)[1].strip().strip('"')
    return "0"
