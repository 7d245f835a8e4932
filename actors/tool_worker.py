"""A tool-worker actor: runs the model's tool calls, each command in a sandbox.

The runtime starts a pool of these (``runtime.toolWorkers``); the coordinator
sends each call to the least busy one with the environment the sanitizer
allowed. Tools contributed by extensions are registered beside the built-ins.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ToolError
from ollm_cli.pipeline.extensions import load_extensions
from ollm_cli.pipeline.records import SessionToolCall, ToolCallPart
from ollm_cli.pipeline.tools import ToolExecutor, ToolRegistry

logger = logging.getLogger(__name__)


class ToolWorkerShell(ShellBase):
    """Gives a ToolExecutor an inbox."""

    def __init__(self, settings: OllmSettings, workspace: Path) -> None:
        registry = ToolRegistry.builtin()
        for tool in load_extensions(workspace=workspace).tools:
            try:
                registry.register(tool)
            except ToolError as error:
                logger.warning("an extension's tool is skipped: %s", error.message)
        self.executor = ToolExecutor(
            settings.tools,
            registry,
            workspace=workspace,
            discovery=settings.services.file_discovery,
            checkpoints=settings.checkpoints,
            checkpoints_root=settings.snapshots.data_dir,
        )

    def schemas(self) -> list[dict[str, Any]]:
        return self.executor.schemas()

    def execute(
        self,
        call: ToolCallPart,
        env: Mapping[str, str],
        approved: bool,
        session_id: str | None = None,
    ) -> SessionToolCall:
        return self.executor.execute(call, dict(env), approved, session_id=session_id)
