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

The parts, one concept each: the kernel's mechanisms in :mod:`.isolation` (the
bubblewrap command line, the ``pids`` and ``memory`` cgroups, the system-call
filter, the workspace as an overlay), what is hidden in ``_hidden_paths``, and
the supervised run (output budget, wall time, disk quota, kill and reap) in
``_supervisor``; :class:`Sandbox` here puts them together.

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
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

import psutil
from pydantic import BaseModel

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.errors import SandboxUnavailableError, ToolError
from ollm_cli.pipeline.tools._control_paths import ControlGuard, Survey
from ollm_cli.pipeline.tools._supervisor import SandboxResult, supervise
from ollm_cli.pipeline.tools.isolation._bwrap import (
    PROBE_TIMEOUT_S,
    args_memfd,
    memfd,
    namespace_args,
)
from ollm_cli.pipeline.tools.isolation._cgroups import MemoryCgroup, PidsCgroup
from ollm_cli.pipeline.tools.isolation._overlay import WorkspaceOverlay
from ollm_cli.pipeline.tools.isolation._seccomp import filter_program

__all__ = ["UNSANDBOXED_KEY", "Sandbox", "SandboxResult", "harden_environment"]

logger = logging.getLogger(__name__)

UNSANDBOXED_KEY = "tools.sandbox.allowUnsandboxed"
_UNSET_VARIABLES = ("GIT_ASKPASS", "SSH_ASKPASS")


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
        argv = [
            self.bwrap_path,
            *namespace_args(self.bwrap_path, self.settings.tmp_mb, network=False),
            "true",
        ]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                timeout=PROBE_TIMEOUT_S,
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
        overlay: WorkspaceOverlay | None = None,
    ) -> SandboxResult:
        """Run ``argv`` inside the sandbox with ``env`` (hardened) and the limits.

        With ``overlay`` (only where bubblewrap runs: see :attr:`available`), the
        command sees the workspace as that overlay, and the overlay is settled once
        the command is gone, before the control paths are looked at.

        Raises :class:`SandboxUnavailableError` where bubblewrap cannot run and
        ``tools.sandbox.allowUnsandboxed`` is false, and :class:`ToolError` for
        an empty ``argv`` or a ``cwd`` that is not a directory.
        """
        workdir = self._checked_workdir(argv, cwd)
        self.check()
        sandboxed = self.probe().ok
        if not sandboxed:
            overlay = None
        full_env = harden_environment(env)
        cgroup = self._make_cgroup()
        memory = self._make_memory_cgroup()
        with contextlib.ExitStack() as stack:
            for group in (memory, cgroup):  # removed last, pids cgroup first
                if group is not None:
                    stack.callback(group.remove)
            guard: ControlGuard | None = None
            pass_fds: tuple[int, ...] = ()
            if sandboxed:
                guard = stack.enter_context(ControlGuard(self.workspace, self._survey))
                command, pass_fds = self._sandboxed_command(
                    argv, full_env, workdir, guard, stack, overlay=overlay is not None
                )
                if overlay is not None:
                    command = overlay.wrap(command)
                launch_env = {"PATH": full_env.get("PATH", os.defpath)}
                launch_cwd = self.workspace
            else:
                command = self._unsandboxed_command(argv)
                launch_env, launch_cwd = full_env, workdir
            try:
                result = supervise(
                    _joining_cgroups(command, cgroup, memory),
                    env=launch_env,
                    cwd=launch_cwd,
                    stdin=stdin,
                    pass_fds=pass_fds,
                    cgroup=cgroup,
                    sandboxed=sandboxed,
                    settings=self.settings,
                    workspace=self.workspace if overlay is None else overlay.upper,
                )
            finally:  # the command is gone, whatever happened: undo what it planted
                if overlay is not None:
                    overlay.settle()
                undone = guard.finish() if guard is not None else []
            return self._completed(result, guard, undone, memory)

    def _checked_workdir(self, argv: list[str], cwd: Path | None) -> Path:
        """The directory to run ``argv`` in, once the call is known to be runnable."""
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
        return workdir

    def _sandboxed_command(
        self,
        argv: list[str],
        env: Mapping[str, str],
        workdir: Path,
        guard: ControlGuard,
        stack: contextlib.ExitStack,
        *,
        overlay: bool = False,
    ) -> tuple[list[str], tuple[int, ...]]:
        """bubblewrap's command line, and the memfds it reads (closed by ``stack``);
        ``overlay``: bubblewrap is started as root in the overlay's namespace."""
        seccomp_fd: int | None = None
        program = filter_program()
        if program is not None:
            seccomp_fd = memfd("ollm-seccomp", program)
            stack.callback(os.close, seccomp_fd)
        args_fd = args_memfd(
            self.bwrap_path,
            self.settings,
            self.workspace,
            env,
            workdir,
            guard,
            seccomp_fd,
            as_root=True if overlay else None,
        )
        stack.callback(os.close, args_fd)
        command = [self.bwrap_path, "--args", str(args_fd), *self._limits(nproc=None), *argv]
        pass_fds = (args_fd,) if seccomp_fd is None else (args_fd, seccomp_fd)
        return command, pass_fds

    def _unsandboxed_command(self, argv: list[str]) -> list[str]:
        _warn_once(
            "unsandboxed",
            "sandbox: %s is true; tool commands run WITHOUT bubblewrap "
            "(limits, environment and hardening still apply)",
            UNSANDBOXED_KEY,
        )
        return [*self._limits(nproc=self._unsandboxed_nproc()), *argv]

    def _completed(
        self,
        result: SandboxResult,
        guard: ControlGuard | None,
        undone: list[str],
        memory: MemoryCgroup | None,
    ) -> SandboxResult:
        """``result`` with what the control paths' guard and the memory cgroup saw."""
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


def _joining_cgroups(
    command: list[str], cgroup: PidsCgroup | None, memory: MemoryCgroup | None
) -> list[str]:
    """``command`` run by a shell that first moves itself into the run's cgroups."""
    joins = [c.path / "cgroup.procs" for c in (cgroup, memory) if c is not None]
    if not joins:
        return command
    return [
        "/bin/sh",
        "-c",
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 126; '
        'shift; n=$((n-1)); done; exec "$@"',
        "ollm-sandbox",
        str(len(joins)),
        *(str(path) for path in joins),
        *command,
    ]
