"""``ollm service status``: whether the service runs, and what its hosts do.

Example::

    print(service_status().model_dump())
"""

from __future__ import annotations

import logging
import time

from pydantic import BaseModel

from ollm_cli.pipeline.service._hosts import (
    activities,
)
from ollm_cli.pipeline.service._processes import (
    find_service,
)
from ollm_cli.pipeline.service._ray_driver import (
    attach_to_service,
)
from ollm_cli.pipeline.service._state import (
    ServicePaths,
    code_version,
)

logger = logging.getLogger(__name__)


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
    attach_to_service(paths, state)
    for activity in activities(state.namespace):
        status.hosts.append(HostStatus.model_validate(activity))
        status.sessions += int(activity["sessions"])
        status.clients += int(activity["clients"])
        status.background += int(activity["background"])
    return status


__all__ = ["HostStatus", "ServiceStatus", "service_status"]
