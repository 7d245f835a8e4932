"""The coordinators of a pipeline host: one per chat, one shared by the
conversations of one environment that ask the user nothing.

A coordinator costs far more to make (hooks, extensions, tool schemas, the
environment's secrets) than a turn: conversations that ask nothing and run with
one environment (a batch's, a load's, ``ollm run -p`` from one terminal) share
one. A chat, which asks its own terminal for approvals, has its own.

Example::

    coordinators = HostCoordinators(runtime, settings, workspace, route=host.route)
    coordinator = coordinators.for_conversation(environment, interactive=False)
    coordinators.release(coordinator, still_used=False)
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import orjson

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.events import EventBus, PipelineEvent
from ollm_cli.pipeline.runtime import Runtime


class HostCoordinators:
    """The coordinators of one host (see the module); ``route`` receives every event
    they publish."""

    def __init__(
        self,
        runtime: Runtime,
        settings: OllmSettings,
        workspace: Path,
        route: Callable[[PipelineEvent], None],
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.workspace = workspace
        self.route = route
        self.shared: dict[str, Coordinator] = {}
        """The coordinators shared by conversations that ask nothing, by environment."""

    def for_conversation(
        self, environment: dict[str, str] | None, *, interactive: bool
    ) -> Coordinator:
        """The coordinator of a new conversation (``environment``: the client's, or
        this process's)."""
        env = environment if environment is not None else dict(os.environ)
        key = None
        if not interactive:
            key = hashlib.sha256(orjson.dumps(env, option=orjson.OPT_SORT_KEYS)).hexdigest()
            shared = self.shared.get(key)
            if shared is not None:
                return shared
        coordinator = Coordinator(
            self.runtime,
            self.settings,
            workspace=self.workspace,
            events=EventBus(),
            environment=env,
        )
        coordinator.approval.interactive = interactive
        coordinator.events.subscribe(self.route)
        if key is not None:
            self.shared[key] = coordinator
        return coordinator

    def is_shared(self, coordinator: Coordinator) -> bool:
        return any(shared is coordinator for shared in self.shared.values())

    def release(self, coordinator: Coordinator, *, still_used: bool) -> None:
        """A conversation of ``coordinator`` closed: a shared one no conversation
        uses any more goes."""
        if still_used:
            return
        for key, shared in list(self.shared.items()):
            if shared is coordinator:
                del self.shared[key]

    def clear(self) -> None:
        self.shared.clear()


__all__ = ["HostCoordinators"]
