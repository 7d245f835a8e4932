"""The service's own Ray head: started with only what a one-node service needs, its
files in a folder only this user reaches.

Example::

    head = start_head(temp_dir, while_starting=preload)  # then ray.init(address=...)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

OBJECT_STORE_BYTES = 128 * 1024 * 1024

WORKER_MODULES = (
    "ollm_cli.pipeline.service.hosting._host",
    "ollm_cli.pipeline.providers._factory",
)
"""What each of the head's workers imports as it starts (all the service's workers
are pipeline hosts): the host's code, and the providers' (with their HTTP
clients), which a host's first session needs (about 0.5 s of its opening)."""

AGENT_SCRIPT = Path(__file__).with_name("_agent.py")
"""The service's raylet agents, run as a script (see :func:`lean_dashboard_agent`)."""

PRESTARTED_WORKERS = 1
"""The workers Ray starts with the raylet (one per CPU of the head): the first
host's."""


def start_head(temp_dir: Path, while_starting: Callable[[], None] | None = None) -> Any:
    """Start this service's Ray head: only the processes a one-node service needs,
    its files (sockets, logs) in ``temp_dir``, a folder only this user can reach
    (not Ray's ``/tmp/ray``, open to every user: another could rename the raylet's
    socket there, or read session ids in its logs).

    ``while_starting`` runs once the head's processes are launched, while the GCS
    and the raylet start: the daemon imports the pipeline's modules then, on the
    other core, in its main thread (not beside ``import ray``).

    ``ray.init`` would also start the autoscaler's monitor and the log monitor
    (Python processes that compete with the head's own start on a small
    machine), and bind the dashboard agent to Ray's fixed port 52365: on a
    machine where another Ray runs (another user, another ``OLLM_HOME``) that
    port is taken and the agent retries for about 4 s before the head is
    ready. Any free port does.

    The first pipeline host's process starts with the head: the raylet prestarts
    one worker per CPU as it starts, and each worker imports
    :data:`WORKER_MODULES` before it waits for work. The worker that becomes the
    host has thus imported Ray and the host's code while the daemon imported the
    pipeline's modules, connected, prepared its socket and the client said hello
    (about 1.5 s of a cold start on 2 cores, off the path). It is not started
    when the daemon connects (Ray's ``prestart_worker_first_driver``): Ray then
    holds the driver's connection until the worker has imported Ray and
    registered (0.7 s of a cold start, the daemon idle). The head has one CPU:
    the service runs no task that needs one (its hosts reserve none), and a
    second prestarted worker would only compete for the machine's cores and hold
    150 MB idle.

    Ray runs its workers at niceness 15, below every other process of the user:
    the service's workers are its pipeline hosts, which answer the user's turns
    (and start the first one), and run at the daemon's own priority. On a busy
    machine a host at 15 waited seconds for a core at every step of a cold start.

    Nothing answers without the token: no dashboard, no metrics collection (the
    agent's Prometheus endpoint) and no API server (the dashboard head, whose own
    Prometheus endpoint answers anyone on the machine); the daemon needs neither.
    The raylet's two agents, which it cannot do without, are the service's own
    (:func:`lean_dashboard_agent`): the dashboard agent serves nothing, as Ray's
    minimal one does not, and the runtime environment agent refuses every
    runtime environment (the service's hosts name none); both are ready at once,
    where the raylet waited for Ray's to import Ray, aiohttp and every module of
    the dashboard before it registered its node (0.9 s of a core for the runtime
    environment agent alone, more on a busy machine).
    """
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    keep_ray_folders_private()

    class _HeadWithoutApiServer(Node):
        def start_api_server(
            self, *, include_dashboard: bool | None, raise_on_failure: bool
        ) -> None:
            self._webui_url = None

        def start_ray_processes(self) -> None:
            super().start_ray_processes()
            if while_starting is not None:  # before Node waits for the raylet
                while_starting()

    # RayParams' annotations are narrower than what Ray itself passes to it
    # (include_log_monitor is a bool in `ray start`, _system_config values any JSON)
    options: dict[str, Any] = {
        "node_ip_address": "127.0.0.1",
        "num_cpus": PRESTARTED_WORKERS,
        "object_store_memory": OBJECT_STORE_BYTES,
        "include_dashboard": False,
        "dashboard_agent_listen_port": 0,
        "no_monitor": True,
        "include_log_monitor": False,
        "temp_dir": str(temp_dir),
        "_system_config": {
            "enable_worker_prestart": True,
            "prestart_worker_first_driver": False,
            "preload_python_modules": list(WORKER_MODULES),
            "enable_metrics_collection": False,
            "worker_niceness": 0,
        },
    }
    params = RayParams(**options)
    with lean_dashboard_agent():
        head = _HeadWithoutApiServer(
            params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True
        )
    close_ray_folders(temp_dir, Path(head.get_session_dir_path()))
    return head


@contextlib.contextmanager
def lean_dashboard_agent() -> Iterator[None]:
    """While a head starts in this process, its raylet gets the service's own agents
    (:mod:`~ollm_cli.pipeline.service.ray_node._agent`: the ports the raylet waits
    for, published at once) instead of Ray's, which import Ray first, and all the
    dashboard's modules or aiohttp (1.3 s and 0.9 s of CPU; the raylet, and so the
    head, waited for them). Ray is not asked whether its full agent could run either (it asks
    ``get_dashboard_dependency_error``, which imports aiohttp, gRPC's asyncio,
    OpenTelemetry and Prometheus in the daemon, about 0.4 s)."""
    from ray._private import ray_constants, services
    from ray._private import utils as private_utils

    asked = private_utils.get_dashboard_dependency_error
    build = services._build_python_executable_command_memory_profileable

    def minimal() -> ImportError:
        return ImportError("the OLLM service runs no dashboard: the minimal agent will do")

    def command(component: str, session_dir: str, unbuffered: bool = True) -> list[str]:
        # isolated, no site: the script imports a few standard modules only, whatever
        # the environment (Ray's arguments for its own agent follow, and are read)
        if component == ray_constants.PROCESS_TYPE_DASHBOARD_AGENT:
            return [sys.executable, "-I", "-S", str(AGENT_SCRIPT)]
        if component == ray_constants.PROCESS_TYPE_RUNTIME_ENV_AGENT:
            return [sys.executable, "-I", "-S", str(AGENT_SCRIPT), "--ollm-agent=runtime_env"]
        return list(build(component, session_dir, unbuffered))

    private_utils.get_dashboard_dependency_error = minimal
    services._build_python_executable_command_memory_profileable = command
    try:
        yield
    finally:
        private_utils.get_dashboard_dependency_error = asked
        services._build_python_executable_command_memory_profileable = build


def keep_ray_folders_private() -> None:
    """Ray opens every folder it makes (its temp folder, session, sockets, logs) to
    every user with mode 0777, for machines where users share ``/tmp/ray``; in this
    process it leaves their mode (0700) as it is."""
    with contextlib.suppress(Exception):
        from ray._common import utils as ray_utils

        ray_utils.try_make_directory_shared = lambda directory_path: None


def close_ray_folders(temp_dir: Path, session_dir: Path) -> None:
    """Ray opens the folders it makes to every user (mode 0777, for machines where
    users share ``/tmp/ray``), and each new worker does again: this service's are its
    user's alone again. (The folder they are in, :func:`ray_temp_dir`'s parent, is
    private whatever Ray does: no other user reaches them in between.)"""
    folders = [temp_dir, session_dir]
    with contextlib.suppress(OSError):
        folders += [entry for entry in session_dir.iterdir() if entry.is_dir()]
    for folder in folders:
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)


__all__ = [
    "AGENT_SCRIPT",
    "OBJECT_STORE_BYTES",
    "PRESTARTED_WORKERS",
    "WORKER_MODULES",
    "close_ray_folders",
    "keep_ray_folders_private",
    "lean_dashboard_agent",
    "start_head",
]
