"""The sandbox every tool command runs in: bubblewrap plus limits.

A :class:`Sandbox` runs one command (an argv) in a child process inside
bubblewrap: the system read-only (``--ro-bind / /``), the workspace writable,
a private ``/tmp``, a fresh ``/dev`` and ``/proc``, every namespace unshared
(the network too, unless ``tools.sandbox.network`` is true), a new session,
killed with its parent. The environment is exactly the one given (already
sanitized by the caller) plus the shell hardening of :func:`harden_environment`;
it reaches bubblewrap through a memfd (``--args``), never the command line, so
no value shows in a process listing.

Limits:

- wall time: the whole process group is killed (the sandbox's PID namespace
  dies with it, taking every process inside);
- CPU time and memory: ``RLIMIT_CPU`` and ``RLIMIT_AS`` set by ``prlimit``
  inside the sandbox;
- processes: ``RLIMIT_NPROC`` set inside the sandbox's user namespace, so it
  counts the sandbox's processes only (a fork bomb fails to fork and is then
  stopped by the wall time). Root ignores ``RLIMIT_NPROC``, so when running as
  root each run gets its own ``pids`` cgroup with ``pids.max`` (cgroup v1, or
  v2 where the controller is delegated) and is stopped as soon as it hits it;
- disk: a command that adds more than ``maxWriteMb`` to the workspace's file
  system (its free space, read every 50 ms) is stopped;
- output: read incrementally; past ``maxOutputBytes`` the rest is counted and
  dropped, and a note says how much (``[output truncated: N more bytes]``);
  a command that keeps writing far past the cap is stopped.

Where bubblewrap cannot run, :meth:`Sandbox.run` raises
:class:`~ollm_cli.pipeline.errors.SandboxUnavailableError` naming the config key
``tools.sandbox.allowUnsandboxed``; with that key true the command runs
without the sandbox but with the same limits, environment and hardening.

Example::

    sandbox = Sandbox(SandboxSettings(), workspace=Path.cwd())
    result = sandbox.run(["bash", "-c", "echo hi"], env={"PATH": "/usr/bin:/bin"})
    result.stdout                  # "hi\\n"
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

import psutil
from pydantic import BaseModel, ConfigDict

from ollm_cli.config.paths import ollm_home
from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.errors import SandboxUnavailableError, ToolError
from ollm_cli.pipeline.tools._control_paths import ControlGuard, Survey
from ollm_cli.pipeline.tools._seccomp import filter_program

logger = logging.getLogger(__name__)

UNSANDBOXED_KEY = "tools.sandbox.allowUnsandboxed"
OUTPUT_STOP_FACTOR = 16
"""A command is stopped once it has written this many times ``maxOutputBytes``."""
_READ_CHUNK = 64 * 1024
_POLL_S = 0.05
_PROBE_TIMEOUT_S = 10.0
_REAP_TIMEOUT_S = 5.0
_UNSET_VARIABLES = ("GIT_ASKPASS", "SSH_ASKPASS")
ROOT_SANDBOX_ID = 1000
"""The uid and gid a command started by root has inside the sandbox: mapped to root
outside (what it creates belongs to root), but with no capability, so it cannot
unmount, remount, chown or bypass file modes: root's files are its own, other
users' files it reads and writes only as their modes let anyone."""

KilledBy = (
    Literal[
        "wall_time",
        "cpu_time",
        "max_processes",
        "max_output",
        "memory",
        "max_file_size",
        "disk_quota",
    ]
    | str
)


class SandboxResult(BaseModel):
    """What one command did: its exit code, its (capped) output and why it stopped.

    ``killed_by`` names the limit that stopped the command (``wall_time``,
    ``cpu_time``, ``max_processes``, ``max_output``) or the signal that killed
    it (``SIGKILL``, ``SIGSEGV``...), and is ``None`` when it exited by itself.
    """

    model_config = ConfigDict(frozen=True)

    exit_code: int
    stdout: str
    stderr: str
    truncated_bytes: int = 0
    timed_out: bool = False
    killed_by: KilledBy | None = None
    duration_ms: float
    sandboxed: bool = True
    memory_limit: Literal["cgroup", "rlimit"] = "rlimit"
    """Which memory limit applied: ``cgroup`` (the whole call, ``/tmp`` included, in a
    memory cgroup of its own) or ``rlimit`` (``RLIMIT_AS``, per process)."""
    protected_paths: list[str] = []
    """The workspace's control paths that were read-only in the run (relative)."""
    undone: list[str] = []
    """What the run did to control paths and was undone after it (``removed sub/.git``)."""


def harden_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the shell hardening every tool command gets.

    No pager (``PAGER=cat``, ``GIT_PAGER=cat``), git never prompts
    (``GIT_TERMINAL_PROMPT=0``) and uses no credential helper (an empty
    ``credential.helper`` through ``GIT_CONFIG_COUNT``, which clears the list,
    and no system config), and no askpass program::

        harden_environment({"PATH": "/bin"})["GIT_TERMINAL_PROMPT"]   # "0"
    """
    hardened = {k: v for k, v in env.items() if k not in _UNSET_VARIABLES}
    hardened.update(
        PAGER="cat",
        GIT_PAGER="cat",
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
    )
    raw_count = hardened.get("GIT_CONFIG_COUNT", "0")
    count = int(raw_count) if raw_count.isdigit() else 0
    if str(count) != raw_count:
        # A malformed count makes git refuse to run: start the list afresh.
        for name in [k for k in hardened if re.fullmatch(r"GIT_CONFIG_(KEY|VALUE)_\d+", k)]:
            del hardened[name]
    hardened[f"GIT_CONFIG_KEY_{count}"] = "credential.helper"
    hardened[f"GIT_CONFIG_VALUE_{count}"] = ""
    hardened["GIT_CONFIG_COUNT"] = str(count + 1)
    return hardened


@functools.lru_cache(maxsize=8)
def _bwrap_has(bwrap: str, option: str) -> bool:
    """Whether this bubblewrap knows ``option`` (``--disable-userns`` came in 0.8)."""
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option.encode() in done.stdout + done.stderr


class _Probe(BaseModel):
    """Whether bubblewrap runs here, and if not, why."""

    ok: bool
    reason: str = ""


_probe_lock = threading.Lock()
_probes: dict[str, _Probe] = {}
_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    with _probe_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message, *args)


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
        deadline = time.monotonic() + _REAP_TIMEOUT_S
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
            found.append(_join_cgroup(mount_point, root, v1_path))
        elif fstype == "cgroup2" and v2_path is not None:
            directory = _join_cgroup(mount_point, root, v2_path)
            subtree = directory / "cgroup.subtree_control"
            if subtree.exists() and controller in subtree.read_text().split():
                found.append(directory)
    return found


def _join_cgroup(mount_point: str, root: str, path: str) -> Path:
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
        deadline = time.monotonic() + _REAP_TIMEOUT_S
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


#: Credential stores under a home folder that tool commands never see.
HIDDEN_IN_HOME: tuple[str, ...] = (
    ".ssh", ".gnupg", ".aws", ".config/gcloud", ".azure", ".kube", ".docker",
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".yarnrc", ".config/gh",
    ".config/hub", ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials",
    ".terraform.d/credentials.tfrc.json", ".vault-token", ".pgpass", ".my.cnf",
    ".config/op", ".password-store", ".local/share/keyrings", ".config/rclone",
    ".s3cfg", ".boto", ".mozilla", ".config/google-chrome", ".config/chromium",
    ".bash_history", ".zsh_history", ".python_history", ".psql_history",
    ".mysql_history", ".config/git/credentials",
)  # fmt: skip
#: Folders of ``/etc`` whose files only root should read are looked at, one level deep.
_ROOT_ONLY_DIRS = ("/etc", "/etc/ssh", "/etc/sudoers.d", "/etc/ssl/private")


@functools.lru_cache(maxsize=1)
def root_only_files() -> tuple[str, ...]:
    """Files of ``/etc`` that other users may not read (``/etc/shadow``, host keys...)."""
    found: list[str] = []
    for folder in _ROOT_ONLY_DIRS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISLNK(info.st_mode) and not info.st_mode & 0o004:
                found.append(entry.path)
    return tuple(sorted(found))


def hidden_paths(
    settings: SandboxSettings, homes: list[Path], ollm_home_dir: Path
) -> list[tuple[Path, bool]]:
    """What tool commands may not read: ``(path, is_dir)`` of each that exists.

    The OLLM home, the credential stores under each home, root-only files, and
    ``tools.sandbox.denyRead``, less ``tools.sandbox.allowRead``.
    """
    wanted: list[Path] = [ollm_home_dir]
    for home in homes:
        wanted.extend(home / name for name in HIDDEN_IN_HOME)
    wanted.extend(Path(p) for p in root_only_files())
    wanted.extend(Path(p).expanduser() for p in settings.deny_read)
    allowed = {Path(p).expanduser().resolve() for p in settings.allow_read}
    out: list[tuple[Path, bool]] = []
    seen: set[Path] = set()
    for path in wanted:
        try:
            real = path.resolve()
            info = real.stat()
        except (OSError, RuntimeError):
            continue
        if real in seen or real in allowed or real == Path(real.anchor):
            continue
        seen.add(real)
        out.append((real, stat.S_ISDIR(info.st_mode)))
    return out


class _DiskUse:
    """How much the workspace's file system has filled since the command started.

    Read from ``statvfs`` (a few microseconds), so that nothing the command does
    (a deleted file held open, a sparse file filled, many small files) hides it;
    what else writes to that file system meanwhile counts too.
    """

    def __init__(self, workspace: Path, quota: int) -> None:
        self.workspace = workspace
        self.quota = quota
        self.start = self._used()

    def _used(self) -> int:
        try:
            info = os.statvfs(self.workspace)
        except OSError:  # pragma: no cover - the workspace is there while we run
            return 0
        return (info.f_blocks - info.f_bfree) * info.f_frsize

    def exceeded(self) -> bool:
        """Whether the command has added more than the quota."""
        return self._used() - self.start > self.quota


class _Output:
    """stdout and stderr read incrementally, sharing one byte budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self.dropped: dict[str, int] = {"stdout": 0, "stderr": 0}
        self.total = 0

    def add(self, stream: str, data: bytes) -> None:
        self.total += len(data)
        room = max(0, self.budget - len(self.kept["stdout"]) - len(self.kept["stderr"]))
        self.kept[stream] += data[:room]
        self.dropped[stream] += max(0, len(data) - room)

    def text(self, stream: str, stopped: bool) -> str:
        text = bytes(self.kept[stream]).decode("utf-8", errors="replace")
        dropped = self.dropped[stream]
        if dropped:
            more = f"at least {dropped}" if stopped else str(dropped)
            text += f"\n[output truncated: {more} more bytes]"
        return text


class Sandbox:
    """Runs commands in bubblewrap with the limits of ``tools.sandbox``.

    ``bwrap_path`` and ``prlimit_path`` default to the programs on ``PATH``;
    whether bubblewrap works is checked once per path by a trial run.
    """

    def __init__(
        self,
        settings: SandboxSettings,
        workspace: Path,
        *,
        bwrap_path: str | Path | None = None,
        prlimit_path: str | Path | None = None,
    ) -> None:
        self.settings = settings
        resolved = Path(workspace).expanduser().resolve()
        if not resolved.is_dir():
            raise ToolError(
                f"the workspace {resolved} is not a directory",
                hint="run ollm from your project directory, or create it first",
            )
        if resolved == Path(resolved.anchor):
            raise ToolError(
                "the workspace is the root directory: tools would be able to write anywhere",
                hint="run ollm from a project directory",
            )
        self.workspace = resolved
        self._survey: Survey | None = None
        """The last look at the workspace's control paths, to start the next from."""
        self.bwrap_path = str(bwrap_path) if bwrap_path else shutil.which("bwrap") or "bwrap"
        self.prlimit_path = (
            str(prlimit_path) if prlimit_path else shutil.which("prlimit") or "prlimit"
        )

    # -- availability -------------------------------------------------------

    def probe(self) -> _Probe:
        """Whether bubblewrap can run here (a trial run, cached per program path)."""
        key = self.bwrap_path
        with _probe_lock:
            cached = _probes.get(key)
        if cached is not None:
            return cached
        result = self._trial_run()
        with _probe_lock:
            _probes[key] = result
        if not result.ok:
            logger.info("sandbox: bubblewrap unavailable: %s", result.reason)
        return result

    def _trial_run(self) -> _Probe:
        if not Path(self.bwrap_path).is_file() and not shutil.which(self.bwrap_path):
            return _Probe(ok=False, reason=f"the bubblewrap program ({self.bwrap_path}) is missing")
        argv = [self.bwrap_path, *self._namespace_args(network=False), "true"]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=_PROBE_TIMEOUT_S,
                check=False,
                env={"PATH": os.defpath},
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return _Probe(ok=False, reason=f"bubblewrap did not start ({type(error).__name__})")
        if done.returncode != 0:
            detail = done.stderr.decode("utf-8", errors="replace").strip()[:300]
            return _Probe(
                ok=False,
                reason=f"a trial run of bubblewrap failed (exit {done.returncode}: "
                f"{detail or 'no message'})",
            )
        return _Probe(ok=True)

    @property
    def available(self) -> bool:
        """Whether commands run sandboxed here."""
        return self.probe().ok

    def check(self) -> None:
        """Raise :class:`SandboxUnavailableError` if commands cannot run here."""
        probe = self.probe()
        if probe.ok or self.settings.allow_unsandboxed:
            return
        raise SandboxUnavailableError(
            f"cannot run tool commands: bubblewrap, the sandbox, cannot run here "
            f"({probe.reason}); OLLM never runs them unsandboxed unless told to",
            hint=f"install bubblewrap (apt install bubblewrap) and allow user namespaces, "
            f"or set {UNSANDBOXED_KEY}: true in your config to run tool commands "
            f"without a sandbox (still limited, but able to write wherever you can)",
        )

    # -- running ------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path | None = None,
        stdin: bytes | None = None,
    ) -> SandboxResult:
        """Run ``argv`` inside the sandbox with ``env`` (hardened) and the limits.

        Raises :class:`SandboxUnavailableError` where bubblewrap cannot run and
        ``tools.sandbox.allowUnsandboxed`` is false, and :class:`ToolError` for
        an empty ``argv`` or a ``cwd`` that is not a directory.
        """
        if not argv:
            raise ToolError("no command to run", hint="pass the program and its arguments")
        workdir = Path(cwd).resolve() if cwd is not None else self.workspace
        if not workdir.is_dir():
            raise ToolError(
                f"the working directory {workdir} does not exist",
                hint="pass an existing directory inside the workspace",
            )
        if not Path(self.prlimit_path).is_file() and not shutil.which(self.prlimit_path):
            raise SandboxUnavailableError(
                f"cannot apply the tool limits: the prlimit program ({self.prlimit_path}) "
                f"is missing",
                hint="install util-linux, which provides prlimit",
            )
        self.check()
        sandboxed = self.probe().ok
        full_env = harden_environment(env)
        cgroup = self._make_cgroup()
        memory = self._make_memory_cgroup()
        args_fd: int | None = None
        seccomp_fd: int | None = None
        guard: ControlGuard | None = None
        stack = contextlib.ExitStack()
        try:
            if sandboxed:
                guard = stack.enter_context(ControlGuard(self.workspace, self._survey))
                program = filter_program()
                if program is not None:
                    seccomp_fd = _memfd("ollm-seccomp", program)
                args_fd = self._args_memfd(full_env, workdir, guard, seccomp_fd)
                command = [
                    self.bwrap_path,
                    "--args",
                    str(args_fd),
                    *self._limits(nproc=None),
                    *argv,
                ]
                launch_env = {"PATH": full_env.get("PATH", os.defpath)}
                launch_cwd = self.workspace
            else:
                _warn_once(
                    "unsandboxed",
                    "sandbox: %s is true; tool commands run WITHOUT bubblewrap "
                    "(limits, environment and hardening still apply)",
                    UNSANDBOXED_KEY,
                )
                command = [*self._limits(nproc=self._unsandboxed_nproc()), *argv]
                launch_env, launch_cwd = full_env, workdir
            joins = [c.path / "cgroup.procs" for c in (cgroup, memory) if c is not None]
            if joins:
                command = [
                    "/bin/sh",
                    "-c",
                    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 126; '
                    'shift; n=$((n-1)); done; exec "$@"',
                    "ollm-sandbox",
                    str(len(joins)),
                    *(str(path) for path in joins),
                    *command,
                ]
            try:
                result = self._execute(
                    command,
                    env=launch_env,
                    cwd=launch_cwd,
                    stdin=stdin,
                    pass_fds=tuple(fd for fd in (args_fd, seccomp_fd) if fd is not None),
                    cgroup=cgroup,
                    sandboxed=sandboxed,
                )
            finally:  # the command is gone, whatever happened: undo what it planted
                undone = guard.finish() if guard is not None else []
            update: dict[str, object] = {}
            if guard is not None:
                update["protected_paths"] = guard.shown_protected()
                update["undone"] = undone
                self._survey = guard.after
            if memory is not None:
                update["memory_limit"] = "cgroup"
                if memory.oom_killed() and result.killed_by in (None, "SIGKILL"):
                    update["killed_by"] = "memory"
            return result.model_copy(update=update)
        finally:
            stack.close()
            for fd in (args_fd, seccomp_fd):
                if fd is not None:
                    os.close(fd)
            if cgroup is not None:
                cgroup.remove()
            if memory is not None:
                memory.remove()

    def _namespace_args(self, *, network: bool) -> list[str]:
        args = [
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--size", str(self.settings.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
            "--unshare-all",
            "--unshare-user",
            "--new-session",
            "--die-with-parent",
        ]  # fmt: skip
        if _bwrap_has(self.bwrap_path, "--disable-userns"):
            args.append("--disable-userns")  # no nested namespace to regain capabilities in
        if os.geteuid() == 0:
            # Root keeps every capability in its user namespace (and could unmount the
            # read-only binds): run as an ordinary user there, with none at all.
            uid = str(ROOT_SANDBOX_ID)
            args += ["--uid", uid, "--gid", uid, "--cap-drop", "ALL"]
        if network:
            args.append("--share-net")
        return args

    def _args_memfd(
        self, env: Mapping[str, str], workdir: Path, guard: ControlGuard, seccomp_fd: int | None
    ) -> int:
        options = self._namespace_args(network=self.settings.network)
        if seccomp_fd is not None:
            options += ["--seccomp", str(seccomp_fd)]
        homes = [Path.home()]
        if env.get("HOME"):
            homes.append(Path(env["HOME"]))
        hidden = hidden_paths(self.settings, homes, ollm_home())
        inside = [(p, d) for p, d in hidden if p.is_relative_to(self.workspace)]
        # Hidden folders become empty read-only tmpfs, hidden files /dev/null; those
        # holding the workspace are hidden first, the workspace is bound back in.
        options += _hide_args([(p, d) for p, d in hidden if (p, d) not in inside], self.workspace)
        # The workspace is bound after /tmp's tmpfs so that a workspace under /tmp shows.
        options += ["--bind", str(self.workspace), str(self.workspace)]
        options += _hide_args(inside)
        # The workspace's control paths stay read-only: a tool that could write
        # .ollm/config.yaml or .git/hooks could make the next command run code.
        options += guard.bind_args()
        options += ["--clearenv"]
        for name, value in env.items():
            options += ["--setenv", name, value]
        options += ["--chdir", str(workdir)]
        return _memfd("ollm-bwrap-args", b"".join(arg.encode() + b"\0" for arg in options))

    def _limits(self, *, nproc: int | None) -> list[str]:
        settings = self.settings
        processes = settings.max_processes if nproc is None else nproc
        return [
            self.prlimit_path,
            f"--cpu={settings.cpu_time_s}:{settings.cpu_time_s + 1}",
            f"--as={settings.memory_mb * 1024 * 1024}",
            f"--fsize={settings.max_file_mb * 1024 * 1024}",
            f"--nproc={processes}",
            "--",
        ]

    def _unsandboxed_nproc(self) -> int:
        """Without a user namespace RLIMIT_NPROC counts all the user's processes."""
        uid = os.getuid()
        own = sum(1 for p in psutil.process_iter(["uids"]) if p.info["uids"].real == uid)
        return own + self.settings.max_processes

    @staticmethod
    def pids_cgroup_parent() -> Path | None:
        """Where runs get their own pids cgroup: only as root, whom RLIMIT_NPROC does not
        bind (a cgroup costs a few milliseconds per command), and only where one can be made.
        """
        return PidsCgroup.parent() if os.geteuid() == 0 else None

    def _make_memory_cgroup(self) -> MemoryCgroup | None:
        """A memory cgroup for the whole call where the machine allows one."""
        parent = MemoryCgroup.parent()
        if parent is None:
            return None
        try:
            return MemoryCgroup(parent, self.settings.memory_mb * 1024 * 1024)
        except OSError as error:  # pragma: no cover - it worked at the probe
            logger.warning("sandbox: could not create a memory cgroup (%s)", error)
            return None

    def _make_cgroup(self) -> PidsCgroup | None:
        parent = self.pids_cgroup_parent()
        if parent is None:
            if os.geteuid() == 0:
                _warn_once(
                    "nproc",
                    "sandbox: running as root and no pids cgroup can be made here; "
                    "tools.sandbox.maxProcesses is not enforced (wall time still bounds "
                    "a runaway command)",
                )
            return None
        # bubblewrap's own two processes and prlimit's exec count against the limit.
        try:
            return PidsCgroup(parent, self.settings.max_processes + 3)
        except OSError as error:  # pragma: no cover - it worked at the probe
            logger.warning("sandbox: could not create a pids cgroup (%s)", error)
            return None

    def _execute(
        self,
        command: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdin: bytes | None,
        pass_fds: tuple[int, ...],
        cgroup: PidsCgroup | None,
        sandboxed: bool,
    ) -> SandboxResult:
        settings = self.settings
        output = _Output(settings.max_output_bytes)
        stop_at = settings.max_output_bytes * OUTPUT_STOP_FACTOR
        started = time.perf_counter()
        deadline = time.monotonic() + settings.wall_time_s
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        killed_by: str | None = None
        disk = _DiskUse(self.workspace, settings.max_write_mb * 1024 * 1024)
        selector = selectors.DefaultSelector()
        streams: dict[int, str] = {}
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe, selectors.EVENT_READ, name)
            streams[pipe.fileno()] = name
        pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if pending:
                selector.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
            else:
                proc.stdin.close()
        exited_at: float | None = None
        try:
            while selector.get_map():
                now = time.monotonic()
                if now >= deadline:
                    killed_by = "wall_time"
                    break
                if exited_at is not None and now - exited_at > 0.5:
                    break  # the command is gone; a leftover holds the pipes
                for key, _ in selector.select(timeout=min(_POLL_S, deadline - now)):
                    pipe_file: IO[bytes] = key.fileobj  # type: ignore[assignment]
                    if key.data == "stdin":
                        pending = self._feed(selector, pipe_file, pending)
                        continue
                    try:
                        chunk = os.read(pipe_file.fileno(), _READ_CHUNK)
                    except BlockingIOError:  # pragma: no cover - spurious wake-up
                        continue
                    if not chunk:
                        selector.unregister(pipe_file)
                        continue
                    output.add(key.data, chunk)
                if output.total > stop_at:
                    killed_by = "max_output"
                    break
                if cgroup is not None and cgroup.hit_limit():
                    killed_by = "max_processes"
                    break
                if disk.exceeded():
                    killed_by = "disk_quota"
                    break
                if exited_at is None and not sandboxed and proc.poll() is not None:
                    exited_at = time.monotonic()
        finally:
            selector.close()
            self._stop(proc, cgroup)
        returncode = proc.returncode
        exit_code = 128 - returncode if returncode < 0 else returncode
        if killed_by is None:
            killed_by = _signal_cause(exit_code)
        stopped = killed_by == "max_output"
        return SandboxResult(
            exit_code=exit_code,
            stdout=output.text("stdout", stopped),
            stderr=output.text("stderr", stopped),
            truncated_bytes=sum(output.dropped.values()),
            timed_out=killed_by == "wall_time",
            killed_by=killed_by,
            duration_ms=(time.perf_counter() - started) * 1000,
            sandboxed=sandboxed,
        )

    @staticmethod
    def _feed(selector: selectors.BaseSelector, pipe: IO[bytes], pending: memoryview) -> memoryview:
        try:
            written = os.write(pipe.fileno(), pending[:_READ_CHUNK])
        except BlockingIOError:  # pragma: no cover - spurious wake-up
            return pending
        except BrokenPipeError:
            written = len(pending)
        pending = pending[written:]
        if not pending:
            selector.unregister(pipe)
            pipe.close()
        return pending

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], cgroup: PidsCgroup | None) -> None:
        """Kill the command's process group (and cgroup), then reap it."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if cgroup is not None:
            cgroup.kill_all()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        # The group may outlive its leader for a moment (bubblewrap's PID 1, leftovers).
        deadline = time.monotonic() + _REAP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.001)


def _memfd(name: str, data: bytes) -> int:
    """A memory file holding ``data``, read from its start (bubblewrap reads it)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _hide_args(paths: list[tuple[Path, bool]], workspace: Path | None = None) -> list[str]:
    args: list[str] = []
    for path, is_dir in paths:
        if is_dir and workspace is not None and workspace.is_relative_to(path):
            args += ["--tmpfs", str(path)]  # writable, so that the workspace can be bound in
        elif is_dir:
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def _signal_cause(exit_code: int) -> str | None:
    """The limit or signal behind an exit code of 128+N (bubblewrap's and the shell's form)."""
    if exit_code <= 128 or exit_code > 128 + 64:
        return None
    number = exit_code - 128
    if number == signal.SIGXCPU:
        return "cpu_time"
    if number == signal.SIGXFSZ:
        return "max_file_size"
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
