"""The one place a runtime is chosen: :func:`create_runtime`.

Example::

    runtime = create_runtime(settings, Path.cwd())     # settings.runtime.kind
"""

from __future__ import annotations

from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import UsageError
from ollm_cli.pipeline.runtime._inprocess import InProcessRuntime
from ollm_cli.pipeline.runtime._ray import RayRuntime
from ollm_cli.pipeline.runtime._runtime import Runtime, RuntimeKind


def create_runtime(
    settings: OllmSettings,
    workspace: Path,
    *,
    kind: RuntimeKind | None = None,
    ray_address: str | None = None,
) -> Runtime:
    """The runtime named by ``kind`` (default: ``settings.runtime.kind``): Ray actors
    of this command (or of the cluster at ``ray_address``), or plain objects.
    The long-lived local service is reached through its socket, not a runtime
    (:func:`ollm_cli.pipeline.service.open_conversations`)."""
    chosen = kind or settings.runtime.kind
    if chosen == "inprocess":
        return InProcessRuntime(settings, workspace)
    if chosen == "service" and not (ray_address or settings.runtime.ray_address):
        raise UsageError(
            "the service runtime is the local service's socket, not a runtime of this process",
            hint="use ollm_cli.pipeline.service.open_conversations (or RemoteLoad)",
        )
    return RayRuntime(settings, workspace, ray_address=ray_address)


__all__ = ["create_runtime"]
