"""Starting the local service: the daemon process, spawned in a session of its
own, and the wait for its ``state.json``; a service of another version is
replaced when idle.

Example::

    state = ensure_service(settings)    # the running service, started when needed
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.service._processes import (
    find_service,
    stop_service,
)
from ollm_cli.pipeline.service._state import (
    CLUSTER_REFUSED,
    ServicePaths,
    ServiceState,
    code_version,
    ensure_token,
    ray_environment,
    read_state,
    start_lock,
)

logger = logging.getLogger(__name__)

DAEMON_MODULE = __name__.rsplit(".", 1)[0] + "._daemon"
"""What ``python -m`` runs as the daemon (whatever the package is named)."""


def start_service(
    settings: OllmSettings,
    paths: ServicePaths | None = None,
) -> ServiceState:
    """Start the service of this home (or return the one running); ``while_starting``
    runs while the new service's Ray head starts (a client's own imports)."""
    paths = paths or ServicePaths.for_home()
    with start_lock(paths):
        running = find_service(paths)
        if running is not None:
            return running
        return _spawn(settings, paths)


def _spawn(settings: OllmSettings, paths: ServicePaths) -> ServiceState:
    if settings.runtime.ray_address:  # said here at once, not by a daemon after ~20 s
        from ollm_cli.pipeline.runtime import check_cluster

        check_cluster(settings.runtime.ray_address)
    command, env = _daemon_command(settings, paths)
    with open(paths.log, "ab") as log:
        os.chmod(paths.log, 0o600)
        log.write(f"--- starting the OLLM service {code_version()}\n".encode())
        log.flush()
        daemon = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd=str(paths.folder),
            start_new_session=True,
            close_fds=True,
        )
    return _wait_for_state(daemon, settings, paths)


def _daemon_command(
    settings: OllmSettings, paths: ServicePaths
) -> tuple[list[str], dict[str, str]]:
    """The daemon's command line and environment (this home's Ray token, or none for a
    cluster, which has its own; this installation's package first on the path)."""
    cluster = settings.runtime.ray_address
    service = settings.runtime.service
    env = {**os.environ, "OLLM_HOME": str(paths.home)}
    if cluster is None:  # this home's own Ray and token; a cluster has its own token
        ensure_token(paths)
        env.update(ray_environment(paths))
    else:
        paths.ensure()
    env.pop("RAY_ADDRESS", None)
    # the folder holding our top-level package, whatever the package is named (not
    # resolved: an editable install's link tree is that folder, not the repository)
    root = str(Path(__file__).absolute().parents[len(__name__.split(".")) - 1])
    env["PYTHONPATH"] = os.pathsep.join(
        [root, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    )
    command = [
        sys.executable,
        "-m",
        DAEMON_MODULE,
        "serve",
        "--idle-timeout",
        str(service.idle_timeout),
        "--stop-timeout",
        str(service.stop_timeout),
        *(["--ray-address", cluster] if cluster else []),
    ]
    return command, env


def _wait_for_state(
    daemon: subprocess.Popen[bytes], settings: OllmSettings, paths: ServicePaths
) -> ServiceState:
    """The state the new daemon publishes once its Ray answers; why it did not."""
    cluster = settings.runtime.ray_address
    service = settings.runtime.service
    deadline = time.monotonic() + service.start_timeout
    while time.monotonic() < deadline:
        state = read_state(paths)
        if state is not None and state.pid == daemon.pid:
            return state
        if daemon.poll() is not None and daemon.returncode == CLUSTER_REFUSED:
            raise ServiceError(
                f"could not connect to the Ray cluster at {cluster}",
                hint="check runtime.rayAddress (--ray-address HOST:PORT), that the head "
                "runs, and the cluster's token (RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token); "
                f"see {paths.log}",
            )
        if daemon.poll() is not None:
            raise ServiceError(
                f"the OLLM service could not start (exit code {daemon.returncode})",
                hint=f"see its log: `ollm service logs` ({paths.log}); "
                "or run with --runtime inprocess",
            )
        time.sleep(0.05)
    daemon.kill()
    raise ServiceError(
        f"the OLLM service did not answer within {service.start_timeout:g} s",
        hint="the machine may be very busy: try again, raise runtime.service.startTimeout, "
        "or run with --runtime inprocess",
    )


def ensure_service(
    settings: OllmSettings,
    paths: ServicePaths | None = None,
    *,
    announce: Callable[[], None] | None = None,
) -> ServiceState:
    """The running service of this home, started when needed (and
    ``runtime.service.autoStart`` allows): what a thin client needs before it
    opens the service's socket. Imports no Ray (unless a service of another
    version must be stopped first). With ``runtime.rayAddress`` it is the service
    attached to that cluster as its driver (files of its own, see
    :meth:`ServicePaths.for_home`). ``announce`` is called just before a start (it
    takes seconds): the command's one look for a running service is this one."""
    paths = paths or ServicePaths.for_home(cluster=settings.runtime.ray_address)
    state = find_service(paths)
    if state is not None and state.version != code_version():
        state = _replace_other_version(settings, paths, state)
    if state is None:
        if not settings.runtime.service.auto_start:
            raise ServiceError(
                "the OLLM service is not running",
                hint="start it with `ollm service start` (or set runtime.service.autoStart "
                "to true), or run with --runtime inprocess",
            )
        if announce is not None:
            announce()
        state = start_service(settings, paths)
    return state


def _replace_other_version(
    settings: OllmSettings, paths: ServicePaths, state: ServiceState
) -> ServiceState | None:
    # asks the hosts through Ray: only when a service of another version runs
    from ollm_cli.pipeline.service._status import service_status

    status = service_status(paths)
    busy = status.sessions + status.background + status.clients
    if busy:
        raise ServiceError(
            f"the running OLLM service is version {state.version}, this command is "
            f"{code_version()}, and it is busy ({status.sessions} sessions, "
            f"{status.background} background tasks)",
            hint="let them finish and run `ollm service stop` (the next command starts the "
            "new version), or run this one with --runtime inprocess",
        )
    logger.info("restarting the idle OLLM service of version %s", state.version)
    stop_service(paths, timeout_s=settings.runtime.service.stop_timeout)
    return None


__all__ = ["CLUSTER_REFUSED", "ensure_service", "start_service"]
