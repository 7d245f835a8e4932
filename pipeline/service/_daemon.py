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
(:class:`~ollm_cli.pipeline.service.hosting._host.PipelineHost`, one per configuration and
workspace) in the home's own namespace.

Example::

    state = ensure_service(settings)          # starts the service if needed
    print(service_status().model_dump())
    stop_service()
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ollm_cli.config.paths import ray_temp_dir
from ollm_cli.pipeline.service._state import (
    CLUSTER_REFUSED,
    ServicePaths,
    ServiceState,
    code_version,
    ensure_token,
    ray_environment,
    remove_state,
    write_state,
)
from ollm_cli.pipeline.service.ray_node._head import (
    close_ray_folders,
    start_head,
)

if TYPE_CHECKING:
    from ollm_cli.pipeline.service._hosts import HostCache
    from ollm_cli.pipeline.service._protocol import Activity
    from ollm_cli.pipeline.service._socket import ServiceServer

logger = logging.getLogger(__name__)

PRELOADED = (
    "ollm_cli.pipeline.service.hosting._host",
    "ollm_cli.pipeline.service._hosts",
    "ollm_cli.pipeline.service._socket",
)
"""What the daemon imports while its Ray head's processes start (on the core they
leave free as the GCS and the raylet start), instead of before them (the
protocol's models) or when the first client says hello (the host's class, which
``ray.remote`` needs)."""


def idle_for(activities: Sequence[Activity], now: float, since: float) -> float:
    """How long the service has been idle at ``now``: 0 while any host has a client or
    background work, else the time since the last activity (or ``since``)."""
    if any(a.clients or a.background for a in activities):
        return 0.0
    last = max([since, *(a.last_active for a in activities)])
    return max(0.0, now - last)


@dataclass
class _OwnRay:
    """The Ray head the daemon started (none when it is a cluster's driver)."""

    head: Any = None
    temp_dir: Path | None = None
    removable: Path | None = None
    """The folder of random name made for Ray's files, removed at the end."""

    def close_folders(self) -> None:
        # a new worker of Ray opens them again (the folder above them stays private)
        if self.head is not None and self.temp_dir is not None:
            close_ray_folders(self.temp_dir, Path(self.head.get_session_dir_path()))


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

    started = time.time()
    logger.info("daemon up %.2f s after its process started", started - _process_started())
    own = _start_ray(paths, ray_address)
    if own is None:
        return CLUSTER_REFUSED
    # not at the first client's hello; and not in a thread beside `import ray`: two
    # threads importing a package that imports itself back (ctypes) is CPython's
    # deadlock avoidance, and a KeyError ended a daemon that way. Its own head's
    # daemon imported them as the head started (see start_head)
    if own.head is None:
        _preload()
    # after ray.init: Ray installs its own handlers, which would end us undrained
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    hosts, server, socket_stop = _serve_socket(paths, cluster=ray_address is not None)
    _publish_state(paths, own, ray_address, started)
    watch = _Watch(paths.namespace, server, hosts, idle_timeout, stop_timeout, started)
    watch.until_idle_or(stopping, own, retire=ray_address is None)
    socket_stop()
    if ray_address is None:  # a cluster's hosts stay for --continue, and retire when idle
        from ollm_cli.pipeline.service._hosts import drain_hosts

        drain_hosts(paths.namespace, stop_timeout)
    _stop(paths, own)
    return 0


def _preload() -> None:
    import importlib

    started = time.perf_counter()
    for name in PRELOADED:
        importlib.import_module(name)
    logger.info("pipeline modules imported in %.2f s", time.perf_counter() - started)


def _process_started() -> float:
    import psutil

    return float(psutil.Process().create_time())


def _start_ray(paths: ServicePaths, ray_address: str | None) -> _OwnRay | None:
    """This home's own Ray head, with the daemon as its driver; or the daemon as the
    driver of the cluster at ``ray_address`` (``None`` if the cluster refused it)."""
    import ray

    if ray_address is not None:
        from ollm_cli.pipeline.runtime import check_cluster

        try:
            check_cluster(ray_address)  # a refused ray.init retries for ~20 s
            ray.init(
                address=ray_address,
                namespace=paths.namespace,
                log_to_driver=False,
                configure_logging=False,
            )
        except Exception as error:  # its text is Ray's, not ours to show: its type only
            logger.error("could not attach to the Ray cluster at %s: %s", ray_address, error)
            return None
        logger.info("attached to the Ray cluster at %s", ray_address)
        return _OwnRay()
    started = time.time()
    temp_dir, removable = ray_temp_dir(paths.folder / "ray")
    head = start_head(temp_dir, while_starting=_preload)
    ray.init(
        address=head.gcs_address,
        namespace=paths.namespace,
        log_to_driver=False,
        configure_logging=False,
    )
    logger.info(
        "Ray head started in %.2f s (the pipeline's modules imported meanwhile)",
        time.time() - started,
    )
    return _OwnRay(head, temp_dir, removable)


def _publish_state(
    paths: ServicePaths, own: _OwnRay, ray_address: str | None, started: float
) -> None:
    """Write ``state.json``: from now on commands find this service."""
    import psutil
    import ray

    address = ray_address or ray.get_runtime_context().gcs_address
    write_state(
        paths,
        ServiceState(
            address=address,
            namespace=paths.namespace,
            pid=os.getpid(),
            pgid=os.getpgid(0),
            pid_started=psutil.Process(os.getpid()).create_time(),
            version=code_version(),
            started_at=started,
            home=str(paths.home),
            ray_temp=str(own.temp_dir or ""),
            cluster=ray_address,
        ),
    )
    logger.info(
        "OLLM service %s ready at %s (namespace %s, pid %d)",
        code_version(),
        address,
        paths.namespace,
        os.getpid(),
    )


@dataclass
class _Watch:
    """The daemon's watch: idle hosts are retired, an idle service stops."""

    namespace: str
    server: ServiceServer
    hosts: HostCache
    idle_timeout: float
    stop_timeout: float
    started: float

    def until_idle_or(self, stopping: threading.Event, own: _OwnRay, *, retire: bool) -> None:
        """Watch until the service was idle ``idle_timeout`` seconds, ``stopping`` is set
        or Ray no longer answers; with ``retire``, hosts idle that long go meanwhile
        (on a cluster the hosts retire themselves)."""
        check_s = min(5.0, max(self.idle_timeout / 4, 0.2))
        from ollm_cli.pipeline.service._hosts import host_activities

        while not stopping.wait(check_s):
            own.close_folders()
            try:
                hosts = host_activities(self.namespace)
            except Exception as error:  # Ray itself is gone: nothing to serve
                logger.warning("the service's Ray does not answer (%s): stopping", error)
                return
            now = time.time()
            activities = [self.server.activity(), *(activity for _, activity in hosts)]
            idle = idle_for(activities, now, self.started)
            if idle >= self.idle_timeout:
                logger.info("idle for %.0f s: stopping", idle)
                return
            for handle, activity in hosts if retire else []:
                # a pipeline unused that long goes (its model and memory with it)
                if idle_for([activity], now, self.started) >= self.idle_timeout:
                    logger.info("retiring the idle pipeline of %s", activity.workspace)
                    self.hosts.retire(handle, self.stop_timeout)


def _stop(paths: ServicePaths, own: _OwnRay) -> None:
    """The end: no state, no socket, no Ray, no process left of the service."""
    import psutil
    import ray

    remove_state(paths, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        paths.socket.unlink()
    children = psutil.Process(os.getpid()).children(recursive=True)
    with contextlib.suppress(Exception):
        ray.shutdown()
    if own.head is not None:
        with contextlib.suppress(Exception):
            own.head.kill_all_processes(check_alive=False, allow_graceful=True)
    _, alive = psutil.wait_procs(children, timeout=5)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    if own.removable is not None:
        shutil.rmtree(own.removable, ignore_errors=True)
    logger.info("stopped")


def _serve_socket(
    paths: ServicePaths, *, cluster: bool
) -> tuple[HostCache, ServiceServer, Callable[[], None]]:
    """Serve the service's Unix socket on a thread of its own; the hosts' handles it
    keeps, the server and the function that stops it (no new client; the
    conversations stay in their hosts)."""
    import asyncio

    from ollm_cli.pipeline.service._hosts import HostCache, cluster_host, daemon_host, list_hosts
    from ollm_cli.pipeline.service._socket import ServiceServer, bind_socket

    listener = bind_socket(paths)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    hosts = HostCache(cluster_host if cluster else daemon_host)
    server = ServiceServer(
        hosts.get,
        hosts.retire,
        functools.partial(list_hosts, paths.namespace),
        hosts.forget,
    )

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

    return hosts, server, stop_serving


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
