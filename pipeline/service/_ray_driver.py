"""This process as a Ray driver of the local service (``ollm service status`` and
the daemon itself): attaching, detaching, and keeping Ray's own output out of
the terminal (it goes to the service log).

Example::

    attach_to_service(paths, state)     # ray.init(address=..., namespace=...)
    disconnect()
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from ollm_cli.pipeline.errors import ServiceError
from ollm_cli.pipeline.service._ray_head import (
    keep_ray_folders_private,
)
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    ServiceState,
    ray_environment,
)

logger = logging.getLogger(__name__)


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


def quiet_ray_loggers(paths: ServicePaths) -> None:
    """Ray's Python loggers write to the service log, never to the terminal."""
    handler = logging.FileHandler(paths.log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("ray", "ray._private", "ray.util"):
        ray_logger = logging.getLogger(name)
        ray_logger.handlers = [handler]
        ray_logger.propagate = False


_attached: ServicePaths | None = None
"""The service whose Ray this process is a driver of (``ollm service status``)."""


def attach_to_service(paths: ServicePaths, state: ServiceState) -> None:
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
    quiet_ray_loggers(paths)
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


__all__ = ["attach_to_service", "disconnect", "output_to_log", "quiet_ray_loggers"]
