"""The pipeline hosts of the service: one named detached Ray actor per configuration
and workspace, looked up (or created) by name, listed, retired and drained.

Example::

    handle = daemon_host(settings, Path.cwd())   # in the daemon, a Ray driver
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
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

    from ollm_cli.pipeline.service.hosting._host import PipelineHost

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
