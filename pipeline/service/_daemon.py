"""The long-lived local OLLM service: find it, start it, stop it, ask how it is.

The service is a Ray head of its own for this user and this ``OLLM_HOME``,
owned by a small daemon process (``python -m ollm_cli.pipeline.service._daemon serve``). The
daemon starts Ray on 127.0.0.1 only, with token authentication (the token in
``OLLM_HOME/service/token``, mode 0600) and no dashboard, writes
``OLLM_HOME/service/state.json`` once Ray answers, and then watches: after
``runtime.service.idleTimeout`` seconds with no client and no background work
it stops, as it does on SIGTERM (``ollm service stop``): every pipeline host
finishes its background work within ``runtime.service.stopTimeout``, closes
its sessions (their locks are released), and Ray is shut down; whatever is
left of the daemon's process group is killed.

Commands reach it through its socket (:func:`ensure_service`, then
:mod:`~ollm_cli.pipeline.service._connection`): the first one that needs it
starts it when ``runtime.service.autoStart`` is on. A service whose
daemon died, or whose Ray does not answer, is *stale*: its processes are
killed and its files replaced. A service of another OLLM version is restarted
when idle; when busy the command says what to do.

The pipelines live in the service as named detached actors
(:class:`~ollm_cli.pipeline.service._host.PipelineHost`, one per configuration and
workspace) in the home's own namespace.

Example::

    state = ensure_service(settings)          # starts the service if needed
    print(service_status().model_dump())
    stop_service()
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from ollm_cli.config.paths import private_dir_problem, ray_temp_dir
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.service._socket import ServiceServer
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    ServiceState,
    code_version,
    ensure_token,
    ray_environment,
    read_state,
    remove_state,
    start_lock,
    write_state,
)

logger = logging.getLogger(__name__)

HOST_PREFIX = "pipeline-"
CLUSTER_REFUSED = 3
"""The daemon's exit code when the Ray cluster it was to attach to refused it."""
OBJECT_STORE_BYTES = 128 * 1024 * 1024


# --------------------------------------------------------------------- quiet


@contextlib.contextmanager
def output_to_log(paths: ServicePaths) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors: Ray's C++ core
    writes there too) to the service log for the duration."""
    paths.ensure()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    log = os.open(paths.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)


def _quiet_ray_loggers(paths: ServicePaths) -> None:
    """Ray's Python loggers write to the service log, never to the terminal."""
    handler = logging.FileHandler(paths.log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("ray", "ray._private", "ray.util"):
        ray_logger = logging.getLogger(name)
        ray_logger.handlers = [handler]
        ray_logger.propagate = False


# --------------------------------------------------------------- connection


_attached: ServicePaths | None = None
"""The service whose Ray this process is a driver of (``ollm service status``)."""


def _reachable(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
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
    _kill_group(state)
    remove_state(paths, state.pid)
    _remove_ray_folder(state)
    return None


def _members(state: ServiceState) -> list[Any]:
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


def _kill_group(state: ServiceState) -> None:
    """Kill the daemon and every process left of its service."""
    import psutil

    if state.alive():
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
    members = _members(state)
    for process in members:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(members, timeout=5)


def _remove_ray_folder(state: ServiceState) -> None:
    """Remove the folder of random name a service made in the temp folder for its
    Ray's files (``ollm-ray-XXXXXXXX``, when ``OLLM_HOME``'s path was too long for
    Ray's sockets): a daemon that was killed could not. Nothing else is removed:
    only such a folder, this user's own and private."""
    if not state.ray_temp:
        return
    folder = Path(state.ray_temp).parent
    if folder.name.startswith("ollm-ray-") and private_dir_problem(folder) is None:
        shutil.rmtree(folder, ignore_errors=True)


def start_service(
    settings: OllmSettings,
    paths: ServicePaths | None = None,
    *,
    while_starting: Callable[[], None] | None = None,
) -> ServiceState:
    """Start the service of this home (or return the one running); ``while_starting``
    runs while the new service's Ray head starts (a client's own imports)."""
    paths = paths or ServicePaths.for_home()
    with start_lock(paths):
        running = find_service(paths)
        if running is not None:
            return running
        return _spawn(settings, paths, while_starting)


def _spawn(
    settings: OllmSettings, paths: ServicePaths, while_starting: Callable[[], None] | None = None
) -> ServiceState:
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
        __name__ if __name__ != "__main__" else "ollm_cli.pipeline.service._daemon",
        "serve",
        "--idle-timeout",
        str(service.idle_timeout),
        "--stop-timeout",
        str(service.stop_timeout),
        *(["--ray-address", cluster] if cluster else []),
    ]
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
    deadline = time.monotonic() + service.start_timeout
    if while_starting is not None:
        while_starting()
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


def ensure_service(settings: OllmSettings, paths: ServicePaths | None = None) -> ServiceState:
    """The running service of this home, started when needed (and
    ``runtime.service.autoStart`` allows): what a thin client needs before it
    opens the service's socket. Imports no Ray (unless a service of another
    version must be stopped first). With ``runtime.rayAddress`` it is the service
    attached to that cluster as its driver (files of its own, see
    :meth:`ServicePaths.for_home`)."""
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
        state = start_service(settings, paths)
    return state


def _ray_connect(paths: ServicePaths, state: ServiceState) -> None:
    already_imported = "ray" in sys.modules
    os.environ.update(ray_environment(paths))
    if already_imported:
        _reread_ray_environment()
    global _attached
    error = _attach_driver(paths, state.address, state.namespace)
    if error is not None:
        raise ServiceError(
            f"could not connect to the OLLM service at {state.address} ({type(error).__name__})",
            hint="`ollm service stop` and try again; see `ollm service logs`",
        )
    _attached = paths


def _attach_driver(paths: ServicePaths, address: str, namespace: str) -> Exception | None:
    """Connect this process to the Ray at ``address`` as a driver in ``namespace``;
    what failed, if it did. Ray's own messages go to the service log, never to the
    terminal (and its error text is not ours to show: only its type is)."""
    _quiet_ray_loggers(paths)
    keep_ray_folders_private()
    with output_to_log(paths):
        import ray

        if ray.is_initialized():
            ray.shutdown()
        try:
            ray.init(
                address=address,
                namespace=namespace,
                log_to_driver=False,
                configure_logging=False,
                logging_level=logging.ERROR,
            )
        except Exception as error:
            return error
    return None


def _reread_ray_environment() -> None:
    """Ray read some of :func:`ray_environment` when it was imported: make it see
    them now (the node is alone on loopback; this home's token)."""
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    with contextlib.suppress(Exception):
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def disconnect() -> None:
    """Leave the service's Ray (it keeps running), if this process attached to it."""
    global _attached
    if _attached is None:
        return
    paths, _attached = _attached, None
    import ray

    with output_to_log(paths):
        ray.shutdown()


def _replace_other_version(
    settings: OllmSettings, paths: ServicePaths, state: ServiceState
) -> ServiceState | None:
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


# --------------------------------------------------------------------- hosts


def settings_key(settings: OllmSettings, workspace: Path) -> str:
    """Which pipeline host serves this configuration in this workspace."""
    data = settings.model_dump(mode="json")
    data["runtime"].pop("kind", None)
    data["runtime"].pop("ray_address", None)
    data["runtime"].pop("service", None)
    blob = orjson.dumps([data, str(workspace.resolve())], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()[:16]


def host_actor(
    settings: OllmSettings,
    workspace: Path,
    namespace: str,
    *,
    variables: dict[str, str] | None = None,
) -> Any:
    """The pipeline host for this configuration and workspace in ``namespace``,
    created on first use as a named detached actor, and ready (this process is a
    Ray driver: the daemon, or a client attached to a cluster). ``variables``: the
    environment its process needs (on a cluster, whose workers lack ours)."""
    import ray

    from ollm_cli.pipeline.service._host import PipelineHost, host_name

    remote: Any = ray.remote(PipelineHost)
    options: dict[str, Any] = {}
    if variables is not None:
        options["runtime_env"] = {"env_vars": variables}
    handle = remote.options(
        name=host_name(settings_key(settings, workspace)),
        namespace=namespace,
        lifetime="detached",
        get_if_exists=True,
        num_cpus=0,
        max_concurrency=1000,
        max_restarts=0,
        **options,
    ).remote(settings, str(workspace.resolve()), code_version())
    ray.get(handle.ready.remote())
    return handle


def daemon_host(settings: OllmSettings, workspace: Path) -> Any:
    """The daemon's :func:`host_actor` for a client of its socket; what failed, as a
    :class:`ServiceError`."""
    import ray

    try:
        return host_actor(settings, workspace, ray.get_runtime_context().namespace)
    except Exception as error:
        raise ServiceError(
            f"the OLLM service could not start a pipeline ({type(error).__name__}: {error})",
            hint="see `ollm service logs`; or run with --runtime inprocess",
        ) from None


def cluster_host(settings: OllmSettings, workspace: Path) -> Any:
    """:func:`daemon_host` on a Ray cluster, whose workers do not have our variables."""
    import ray

    variables = {k: v for k, v in os.environ.items() if k.startswith("OLLM_")}
    variables["OLLM_HOME"] = str(ServicePaths.for_home().home)
    try:
        return host_actor(
            settings, workspace, ray.get_runtime_context().namespace, variables=variables
        )
    except Exception as error:
        raise ServiceError(
            f"the Ray cluster could not start a pipeline ({type(error).__name__}: {error})",
            hint="see `ollm service logs`; or run with --runtime inprocess",
        ) from None


def _hosts(namespace: str) -> list[Any]:
    import ray

    names = ray.util.list_named_actors(all_namespaces=True)
    handles = []
    for entry in names:
        if entry.get("namespace") == namespace and entry.get("name", "").startswith(HOST_PREFIX):
            with contextlib.suppress(ValueError):
                handles.append(ray.get_actor(entry["name"], namespace=namespace))
    return handles


def _activities(namespace: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    return [activity for _, activity in _host_activities(namespace, timeout_s)]


def _host_activities(namespace: str, timeout_s: float = 10.0) -> list[tuple[Any, dict[str, Any]]]:
    import ray

    handles = _hosts(namespace)
    refs = [h.activity.remote() for h in handles]
    done: list[tuple[Any, dict[str, Any]]] = []
    for handle, ref in zip(handles, refs, strict=True):
        with contextlib.suppress(Exception):
            done.append((handle, ray.get(ref, timeout=timeout_s)))
    return done


# -------------------------------------------------------------------- status


class HostStatus(BaseModel):
    workspace: str
    pid: int
    sessions: int
    clients: int
    background: int
    memory_rss: int


class ServiceStatus(BaseModel):
    """``ollm service status``."""

    running: bool
    home: str
    address: str | None = None
    pid: int | None = None
    uptime_s: float | None = None
    version: str | None = None
    client_version: str
    sessions: int = 0
    clients: int = 0
    background: int = 0
    hosts: list[HostStatus] = []
    log: str


def service_status(paths: ServicePaths | None = None) -> ServiceStatus:
    """How the service is, without starting it."""
    paths = paths or ServicePaths.for_home()
    state = find_service(paths)
    status = ServiceStatus(
        running=state is not None,
        home=str(paths.home),
        client_version=code_version(),
        log=str(paths.log),
    )
    if state is None:
        return status
    status.address = state.address
    status.pid = state.pid
    status.uptime_s = round(time.time() - state.started_at, 1)
    status.version = state.version
    _ray_connect(paths, state)
    for activity in _activities(state.namespace):
        status.hosts.append(HostStatus.model_validate(activity))
        status.sessions += int(activity["sessions"])
        status.clients += int(activity["clients"])
        status.background += int(activity["background"])
    return status


# ---------------------------------------------------------------------- stop


class StopReport(BaseModel):
    was_running: bool
    pid: int | None = None
    graceful: bool = True
    left_processes: int = 0


def stop_service(paths: ServicePaths | None = None, *, timeout_s: float = 30.0) -> StopReport:
    """Stop the service: SIGTERM to the daemon, which drains and stops Ray; whatever
    is still alive after ``timeout_s`` (plus a margin) is killed."""
    paths = paths or ServicePaths.for_home()
    disconnect()
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
    report.left_processes = len(_members(state))
    _kill_group(state)
    remove_state(paths, state.pid)
    _remove_ray_folder(state)
    return report


# -------------------------------------------------------------------- daemon


def idle_for(activities: Sequence[dict[str, Any]], now: float, since: float) -> float:
    """How long the service has been idle at ``now``: 0 while any host has a client or
    background work, else the time since the last activity (or ``since``)."""
    if any(a["clients"] or a["background"] for a in activities):
        return 0.0
    last = max([since, *(float(a["last_active"]) for a in activities)])
    return max(0.0, now - last)


def serve(idle_timeout: float, stop_timeout: float, ray_address: str | None = None) -> int:
    """The daemon: start Ray (or attach to the cluster at ``ray_address`` as its
    driver), serve the socket, publish the state, watch for idleness and SIGTERM."""
    paths = ServicePaths.for_home(cluster=ray_address)
    if ray_address is None:
        ensure_token(paths)
        os.environ.update(ray_environment(paths))
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s service %(levelname)s %(message)s", force=True
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        logger.info("signal %d: stopping", signum)
        stopping.set()

    import psutil
    import ray

    namespace = paths.namespace
    started = time.time()
    head = None
    temp_dir: Path | None = None
    removable: Path | None = None
    if ray_address is None:
        temp_dir, removable = ray_temp_dir(paths.folder / "ray")
        head = start_head(temp_dir)
        ray.init(
            address=head.gcs_address,
            namespace=namespace,
            log_to_driver=False,
            configure_logging=False,
        )
        logger.info("Ray head started in %.2f s", time.time() - started)
    else:
        try:
            ray.init(
                address=ray_address,
                namespace=namespace,
                log_to_driver=False,
                configure_logging=False,
            )
        except Exception as error:  # its text is Ray's, not ours to show: its type only
            logger.error("could not attach to the Ray cluster at %s: %s", ray_address, error)
            return CLUSTER_REFUSED
        logger.info("attached to the Ray cluster at %s", ray_address)
    # after ray.init: Ray installs its own handlers, which would end us undrained
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    address = ray_address or ray.get_runtime_context().gcs_address
    me = psutil.Process(os.getpid())
    server, socket_stop = _serve_socket(paths, cluster=ray_address is not None)
    write_state(
        paths,
        ServiceState(
            address=address,
            namespace=namespace,
            pid=os.getpid(),
            pgid=os.getpgid(0),
            pid_started=me.create_time(),
            version=code_version(),
            started_at=started,
            home=str(paths.home),
            ray_temp=str(temp_dir or ""),
            cluster=ray_address,
        ),
    )
    logger.info(
        "OLLM service %s ready at %s (namespace %s, pid %d)",
        code_version(),
        address,
        namespace,
        os.getpid(),
    )
    check_s = min(5.0, max(idle_timeout / 4, 0.2))
    session_dir = Path(head.get_session_dir_path()) if head is not None else None
    while not stopping.wait(check_s):
        # a new worker of Ray opens them again (the folder above them stays private)
        if temp_dir is not None and session_dir is not None:
            _close_ray_folders(temp_dir, session_dir)
        try:
            hosts = _host_activities(namespace)
        except Exception as error:  # Ray itself is gone: nothing to serve
            logger.warning("the service's Ray does not answer (%s): stopping", error)
            break
        now = time.time()
        idle = idle_for([server.activity(), *(activity for _, activity in hosts)], now, started)
        if idle >= idle_timeout:
            logger.info("idle for %.0f s: stopping", idle)
            break
        for handle, activity in hosts if ray_address is None else []:
            # a pipeline unused that long goes (its model and memory with it); on a
            # cluster the hosts retire themselves
            if idle_for([activity], now, started) >= idle_timeout:
                logger.info("retiring the idle pipeline of %s", activity.get("workspace"))
                _retire(handle, stop_timeout)
    socket_stop()
    if ray_address is None:  # a cluster's hosts stay for --continue, and retire when idle
        _drain(namespace, stop_timeout)
    remove_state(paths, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()
    children = me.children(recursive=True)
    with contextlib.suppress(Exception):
        ray.shutdown()
    if head is not None:
        with contextlib.suppress(Exception):
            head.kill_all_processes(check_alive=False, allow_graceful=True)
    _, alive = psutil.wait_procs(children, timeout=5)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    if removable is not None:
        shutil.rmtree(removable, ignore_errors=True)
    logger.info("stopped")
    return 0


def _serve_socket(
    paths: ServicePaths, *, cluster: bool
) -> tuple[ServiceServer, Callable[[], None]]:
    """Serve the service's Unix socket on a thread of its own; the server and the
    function that stops it (no new client; the conversations stay in their hosts)."""
    import asyncio

    from ollm_cli.pipeline.service._socket import bind_socket

    listener = bind_socket(paths)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    server = ServiceServer(cluster_host if cluster else daemon_host, _retire)

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.serve(listener, stop))
        except Exception:
            logger.exception("the service's socket stopped")

    thread = threading.Thread(target=run, name="ollm-socket", daemon=True)
    thread.start()

    def stop_serving() -> None:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=5)

    return server, stop_serving


def start_head(temp_dir: Path) -> Any:
    """Start this service's Ray head: only the processes a one-node service needs,
    its files (sockets, logs) in ``temp_dir``, a folder only this user can reach
    (not Ray's ``/tmp/ray``, open to every user: another could rename the raylet's
    socket there, or read session ids in its logs).

    ``ray.init`` would also start the autoscaler's monitor and the log monitor
    (Python processes that compete with the head's own start on a small
    machine), prestart workers for the daemon, which runs no task, and bind
    the dashboard agent to Ray's fixed port 52365: on a machine where another
    Ray runs (another user, another ``OLLM_HOME``) that port is taken and the
    agent retries for about 4 s before the head is ready. Any free port does.

    Nothing answers without the token: no dashboard, no metrics collection (the
    agent's Prometheus endpoint) and no API server (the dashboard head, whose own
    Prometheus endpoint answers anyone on the machine); the daemon needs neither.
    """
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    keep_ray_folders_private()

    class _HeadWithoutApiServer(Node):
        def start_api_server(
            self, *, include_dashboard: bool | None, raise_on_failure: bool
        ) -> None:
            self._webui_url = None

    # RayParams' annotations are narrower than what Ray itself passes to it
    # (include_log_monitor is a bool in `ray start`, _system_config values any JSON)
    options: dict[str, Any] = {
        "node_ip_address": "127.0.0.1",
        "num_cpus": max(os.cpu_count() or 1, 2),
        "object_store_memory": OBJECT_STORE_BYTES,
        "include_dashboard": False,
        "dashboard_agent_listen_port": 0,
        "no_monitor": True,
        "include_log_monitor": False,
        "temp_dir": str(temp_dir),
        "_system_config": {
            "prestart_worker_first_driver": False,
            "enable_metrics_collection": False,
        },
    }
    params = RayParams(**options)
    head = _HeadWithoutApiServer(
        params, head=True, shutdown_at_exit=False, spawn_reaper=True, ray_init_cluster=True
    )
    _close_ray_folders(temp_dir, Path(head.get_session_dir_path()))
    return head


def keep_ray_folders_private() -> None:
    """Ray opens every folder it makes (its temp folder, session, sockets, logs) to
    every user with mode 0777, for machines where users share ``/tmp/ray``; in this
    process it leaves their mode (0700) as it is."""
    with contextlib.suppress(Exception):
        from ray._common import utils as ray_utils

        ray_utils.try_make_directory_shared = lambda directory_path: None


def _close_ray_folders(temp_dir: Path, session_dir: Path) -> None:
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


def _retire(handle: Any, stop_timeout: float) -> None:
    import ray

    try:
        ray.get(handle.shutdown.remote(stop_timeout), timeout=stop_timeout + 10)
    except Exception as error:
        logger.warning("a pipeline host did not stop cleanly: %s", error)
    with contextlib.suppress(Exception):
        ray.kill(handle, no_restart=True)


def _drain(namespace: str, stop_timeout: float) -> None:
    """Every host finishes its background work (bounded), closes its sessions, dies."""
    import ray

    handles = _hosts(namespace)
    refs = [h.shutdown.remote(stop_timeout) for h in handles]
    for handle, ref in zip(handles, refs, strict=True):
        try:
            report = ray.get(ref, timeout=stop_timeout + 10)
            if report.get("unfinished"):
                logger.warning("%d conversations were cut short", report["unfinished"])
        except Exception as error:
            logger.warning("a pipeline host did not stop cleanly: %s", error)
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ollm_cli.pipeline.service._daemon")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_parser = sub.add_parser("serve", help="run the service daemon (started by ollm)")
    serve_parser.add_argument("--idle-timeout", type=float, default=1800.0)
    serve_parser.add_argument("--stop-timeout", type=float, default=30.0)
    serve_parser.add_argument("--ray-address", default=None)
    args = parser.parse_args(argv)
    return serve(args.idle_timeout, args.stop_timeout, args.ray_address)


if __name__ == "__main__":
    sys.exit(main())
