"""The service's processes: find the running service (a stale one is cleaned up),
name its processes, and stop it.

Only processes the service started are ever named or killed (see
:func:`service_members`).

Example::

    state = find_service()              # None when no service runs
    report = stop_service(timeout_s=30)
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ollm_cli.config.paths import private_dir_problem
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    ServiceState,
    read_state,
    remove_state,
)

logger = logging.getLogger(__name__)


def _reachable(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        # the host as bytes (it is an address): a str is encoded with the idna codec,
        # whose import (stringprep, unicodedata) was a share of every command's look
        name = host.encode("ascii") if host.isascii() else host
        for family, kind, proto, _, target in socket.getaddrinfo(
            name, int(port), type=socket.SOCK_STREAM
        ):
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(timeout)
                with contextlib.suppress(OSError):
                    probe.connect(target)
                    return True
    except (OSError, ValueError):
        pass
    return False


def find_service(paths: ServicePaths | None = None) -> ServiceState | None:
    """The running service of this home, or ``None``; a stale one is cleaned up."""
    paths = paths or ServicePaths.for_home()
    state = read_state(paths)
    if state is None:
        if paths.state.exists():
            remove_state(paths)  # unreadable: a crash while writing it
        return None
    if state.alive() and _reachable(state.address):
        return state
    logger.warning("the OLLM service (pid %d) is gone or does not answer: replacing it", state.pid)
    kill_service_processes(state)
    remove_state(paths, state.pid)
    remove_ray_folder(state)
    return None


def service_members(state: ServiceState) -> list[Any]:
    """The processes of a service: its daemon's process group (Ray's head processes),
    every process that names the service's GCS address on its command line, and
    every process these started (Ray's agents and workers).

    Only processes the service started are named, even when ``state.json`` is stale
    and its pid, group or address now belong to others: a process of another user,
    one older than the daemon (``pid_started``), or one whose environment does not
    carry this home's token path (the daemon passes it to every process it starts)
    is never one of them, nor are the processes it started."""
    import psutil

    marker = f"={state.address}"
    if state.cluster is not None:  # a cluster's processes are not ours to stop
        marker = "\0"
    token = str(ServicePaths.for_home(Path(state.home)).token)
    uid = os.getuid()
    roots = []
    for process in psutil.process_iter(["pid", "cmdline", "uids", "create_time"]):
        if process.pid == os.getpid():
            continue
        with contextlib.suppress(psutil.Error, OSError):
            if process.info["uids"].real != uid:
                continue
            if process.info["create_time"] < state.pid_started - 1.0:
                continue
            cmdline = process.info.get("cmdline") or []
            if os.getpgid(process.pid) != state.pgid and not any(marker in a for a in cmdline):
                continue
            if process.environ().get("RAY_AUTH_TOKEN_PATH") == token:
                roots.append(process)
    members = {process.pid: process for process in roots}
    for root in roots:
        with contextlib.suppress(psutil.Error):
            for child in root.children(recursive=True):
                if child.pid != os.getpid() and child.uids().real == uid:
                    members.setdefault(child.pid, child)
    return list(members.values())


def kill_service_processes(state: ServiceState) -> None:
    """Kill the daemon and every process left of its service."""
    import psutil

    if state.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
    members = service_members(state)
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(members, timeout=5)


def remove_ray_folder(state: ServiceState) -> None:
    """Remove the folder of random name a service made in the temp folder for its
    Ray's files (``ollm-ray-XXXXXXXX``, when ``OLLM_HOME``'s path was too long for
    Ray's sockets): a daemon that was killed could not. Nothing else is removed:
    only such a folder, this user's own and private."""
    if not state.ray_temp:
        return
    folder = Path(state.ray_temp).parent
    if folder.name.startswith("ollm-ray-") and private_dir_problem(folder) is None:
        shutil.rmtree(folder, ignore_errors=True)


class StopReport(BaseModel):
    # built when first used (`ollm service stop`), not by every client that imports this
    model_config = ConfigDict(defer_build=True)

    was_running: bool
    pid: int | None = None
    graceful: bool = True
    left_processes: int = 0


def stop_service(paths: ServicePaths | None = None, *, timeout_s: float = 30.0) -> StopReport:
    """Stop the service: SIGTERM to the daemon, which drains and stops Ray; whatever
    is still alive after ``timeout_s`` (plus a margin) is killed."""
    paths = paths or ServicePaths.for_home()
    state = read_state(paths)
    if state is None:
        return StopReport(was_running=False)
    report = StopReport(was_running=True, pid=state.pid)
    if state.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s + 15.0
        while state.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        report.graceful = not state.alive()
    report.left_processes = len(service_members(state))
    kill_service_processes(state)
    remove_state(paths, state.pid)
    remove_ray_folder(state)
    return report


__all__ = [
    "StopReport",
    "find_service",
    "kill_service_processes",
    "remove_ray_folder",
    "service_members",
    "stop_service",
]
