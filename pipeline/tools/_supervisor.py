"""One command supervised to its end: output read within a budget, wall time,
the process cgroup, the disk quota; then the process group killed and reaped.

Example::

    result = supervise(["prlimit", "--cpu=5", "--", "true"], env={"PATH": "/bin"},
                       cwd=workspace, stdin=None, pass_fds=(), cgroup=None,
                       sandboxed=False, settings=SandboxSettings(), workspace=workspace)
    result.exit_code             # 0
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict

from ollm_cli.config.settings import SandboxSettings
from ollm_cli.pipeline.tools.isolation._cgroups import REAP_TIMEOUT_S, PidsCgroup

OUTPUT_STOP_FACTOR = 16
"""A command is stopped once it has written this many times ``maxOutputBytes``."""
_READ_CHUNK = 64 * 1024
_POLL_S = 0.05

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


class DiskUse:
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


class Output:
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


def signal_cause(exit_code: int) -> str | None:
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


def supervise(
    command: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    stdin: bytes | None,
    pass_fds: tuple[int, ...],
    cgroup: PidsCgroup | None,
    sandboxed: bool,
    settings: SandboxSettings,
    workspace: Path,
) -> SandboxResult:
    """Run ``command`` to its end or to the first limit it hits."""
    output = Output(settings.max_output_bytes)
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
    limits = _Limits(
        settings.max_output_bytes * OUTPUT_STOP_FACTOR,
        cgroup,
        DiskUse(workspace, settings.max_write_mb * 1024 * 1024),
    )
    pipes = _Pipes(proc, stdin)
    try:
        killed_by = _follow(proc, pipes, output, limits, deadline, sandboxed)
    finally:
        pipes.close()
        _stop(proc, cgroup)
    returncode = proc.returncode
    exit_code = 128 - returncode if returncode < 0 else returncode
    if killed_by is None:
        killed_by = signal_cause(exit_code)
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


def _follow(
    proc: subprocess.Popen[bytes],
    pipes: _Pipes,
    output: Output,
    limits: _Limits,
    deadline: float,
    sandboxed: bool,
) -> str | None:
    """Pump the pipes until they close or a limit is hit (then named)."""
    exited_at: float | None = None
    while pipes.open:
        now = time.monotonic()
        if now >= deadline:
            return "wall_time"
        if exited_at is not None and now - exited_at > 0.5:
            return None  # the command is gone; a leftover holds the pipes
        pipes.pump(min(_POLL_S, deadline - now), output)
        hit = limits.hit(output)
        if hit is not None:
            return hit
        if exited_at is None and not sandboxed and proc.poll() is not None:
            exited_at = time.monotonic()
    return None


class _Limits:
    """The limits checked between two reads: output, processes, disk."""

    def __init__(self, stop_at: int, cgroup: PidsCgroup | None, disk: DiskUse) -> None:
        self.stop_at = stop_at
        self.cgroup = cgroup
        self.disk = disk

    def hit(self, output: Output) -> str | None:
        if output.total > self.stop_at:
            return "max_output"
        if self.cgroup is not None and self.cgroup.hit_limit():
            return "max_processes"
        if self.disk.exceeded():
            return "disk_quota"
        return None


class _Pipes:
    """The command's pipes in one selector: output read and stdin fed without blocking."""

    def __init__(self, proc: subprocess.Popen[bytes], stdin: bytes | None) -> None:
        self.selector = selectors.DefaultSelector()
        for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            assert pipe is not None
            os.set_blocking(pipe.fileno(), False)
            self.selector.register(pipe, selectors.EVENT_READ, name)
        self.pending = memoryview(stdin or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            if self.pending:
                self.selector.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
            else:
                proc.stdin.close()

    @property
    def open(self) -> bool:
        return bool(self.selector.get_map())

    def pump(self, timeout: float, output: Output) -> None:
        """One round: feed stdin, read what stdout and stderr have."""
        for key, _ in self.selector.select(timeout=timeout):
            pipe_file: IO[bytes] = key.fileobj  # type: ignore[assignment]
            if key.data == "stdin":
                self.pending = _feed(self.selector, pipe_file, self.pending)
                continue
            try:
                chunk = os.read(pipe_file.fileno(), _READ_CHUNK)
            except BlockingIOError:  # pragma: no cover - spurious wake-up
                continue
            if not chunk:
                self.selector.unregister(pipe_file)
                continue
            output.add(key.data, chunk)

    def close(self) -> None:
        self.selector.close()


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
    deadline = time.monotonic() + REAP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.001)
