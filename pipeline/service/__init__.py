"""The long-lived local OLLM service: its daemon, its socket, its pipeline hosts and
the thin client of their conversations.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.service._client import (
        RemoteCoordinator,
        coordinator_for,
        open_conversations,
    )
    from ollm_cli.pipeline.service._daemon import (
        connect,
        disconnect,
        find_service,
        service_status,
        start_service,
        stop_service,
    )
    from ollm_cli.pipeline.service._runtime import ServiceRuntime, open_runtime
    from ollm_cli.pipeline.service._state import ServicePaths

__all__ = [
    "RemoteCoordinator",
    "ServicePaths",
    "ServiceRuntime",
    "connect",
    "coordinator_for",
    "disconnect",
    "find_service",
    "open_conversations",
    "open_runtime",
    "service_status",
    "start_service",
    "stop_service",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_client": ("RemoteCoordinator", "coordinator_for", "open_conversations"),
        "_daemon": (
            "connect",
            "disconnect",
            "find_service",
            "service_status",
            "start_service",
            "stop_service",
        ),
        "_runtime": (
            "ServiceRuntime",
            "open_runtime",
        ),
        "_state": ("ServicePaths",),
    },
)
