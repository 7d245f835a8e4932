"""The pipeline hosts of the service: one named detached Ray actor per configuration
and workspace, looked up (or created) by name, listed, retired and drained.

Example::

    handle = daemon_host(settings, Path.cwd())   # in the daemon, a Ray driver
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.service._protocol import HostActivity
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    code_version,
)

logger = logging.getLogger(__name__)


HOST_PREFIX = "pipeline-"


def host_name(key: str) -> str:
    """The Ray actor name of the host for one configuration and workspace."""
    return f"{HOST_PREFIX}{key}"


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

    remote = _host_class()
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


@functools.cache
def _host_class() -> Any:
    """The host's Ray actor class, made once per process (``ray.remote`` inspects the
    class and wraps its methods each time: about 2 ms of the daemon per connection)."""
    import ray

    from ollm_cli.pipeline.service.hosting._host import PipelineHost

    return ray.remote(PipelineHost)


class HostCache:
    """The daemon's handles of its hosts, by configuration and workspace.

    A client's hello costs one lookup here instead of a named-actor lookup in Ray's
    GCS and a round trip to the host (``ready``). A handle is kept until its host
    is retired (:meth:`retire`) or found dead (:meth:`forget`, by whoever called it
    and got Ray's ``RayActorError``): the next :meth:`get` then looks it up (or
    creates it) again, as every hello did before.

    Example::

        hosts = HostCache(daemon_host)
        handle = hosts.get(settings, workspace)     # created, or the kept one
        hosts.forget(handle)                        # it died: the next get replaces it
    """

    def __init__(
        self,
        lookup: Callable[[OllmSettings, Path], Any],
        retire: Callable[[Any, float], None] | None = None,
    ) -> None:
        self._lookup = lookup
        self._retire = retire or retire_host
        self._handles: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, settings: OllmSettings, workspace: Path) -> Any:
        """The host of ``settings`` in ``workspace`` (blocking: Ray, on a miss)."""
        key = settings_key(settings, workspace)
        with self._lock:
            handle = self._handles.get(key)
        if handle is None:
            handle = self._lookup(settings, workspace)
            with self._lock:
                self._handles[key] = handle
        return handle

    def forget(self, handle: Any) -> None:
        """``handle``'s host is dead or going: it is looked up again when next wanted."""
        with self._lock:
            for key in [key for key, kept in self._handles.items() if kept == handle]:
                del self._handles[key]

    def retire(self, handle: Any, stop_timeout: float) -> None:
        """Stop ``handle``'s host (see :func:`retire_host`), and forget it first: a
        client that says hello meanwhile gets a new one."""
        self.forget(handle)
        self._retire(handle, stop_timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self._handles)


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


def list_hosts(namespace: str) -> list[Any]:
    import ray

    names = ray.util.list_named_actors(all_namespaces=True)
    handles = []
    for entry in names:
        if entry.get("namespace") == namespace and entry.get("name", "").startswith(HOST_PREFIX):
            with contextlib.suppress(ValueError):
                handles.append(ray.get_actor(entry["name"], namespace=namespace))
    return handles


def host_activities(namespace: str, timeout_s: float = 10.0) -> list[tuple[Any, HostActivity]]:
    """Each running host of ``namespace`` with what it is doing (the idle check)."""
    import ray

    handles = list_hosts(namespace)
    refs = [h.activity.remote() for h in handles]
    done: list[tuple[Any, HostActivity]] = []
    for handle, ref in zip(handles, refs, strict=True):
        with contextlib.suppress(Exception):
            done.append((handle, ray.get(ref, timeout=timeout_s)))
    return done


def retire_host(handle: Any, stop_timeout: float) -> None:
    import ray

    try:
        ray.get(handle.shutdown.remote(stop_timeout), timeout=stop_timeout + 10)
    except Exception as error:
        logger.warning("a pipeline host did not stop cleanly: %s", error)
    with contextlib.suppress(Exception):
        ray.kill(handle, no_restart=True)


def drain_hosts(namespace: str, stop_timeout: float) -> None:
    """Every host finishes its background work (bounded), closes its sessions, dies."""
    import ray

    handles = list_hosts(namespace)
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


__all__ = [
    "HOST_PREFIX",
    "HostCache",
    "cluster_host",
    "daemon_host",
    "drain_hosts",
    "host_activities",
    "host_actor",
    "host_name",
    "list_hosts",
    "retire_host",
    "settings_key",
]
