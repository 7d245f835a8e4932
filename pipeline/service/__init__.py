"""The long-lived local OLLM service: its daemon, its socket, its pipeline hosts and
the thin client of their conversations.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.service._client import RemoteCoordinator, open_conversations
    from ollm_cli.pipeline.service._launch import start_service
    from ollm_cli.pipeline.service._load_client import RemoteLoad
    from ollm_cli.pipeline.service._processes import find_service, stop_service
    from ollm_cli.pipeline.service._state import ServicePaths
    from ollm_cli.pipeline.service._status import service_status

__all__ = [
    "RemoteCoordinator",
    "RemoteLoad",
    "ServicePaths",
    "find_service",
    "open_conversations",
    "service_status",
    "start_service",
    "stop_service",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_client": ("RemoteCoordinator", "open_conversations"),
        "_launch": ("start_service",),
        "_processes": ("find_service", "stop_service"),
        "_status": ("service_status",),
        "_load_client": ("RemoteLoad",),
        "_state": ("ServicePaths",),
    },
)
