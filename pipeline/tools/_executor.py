"""Running one tool call: approval, argument validation, the run, the record.

:meth:`ToolExecutor.execute` never raises into the chat: whatever happens
(denied, unknown tool, bad arguments, the sandbox refusing, the tool failing)
it returns a :class:`~ollm_cli.pipeline.records.SessionToolCall` whose ``success``,
``error`` and ``result.llmContent`` tell the model and the user what happened,
with the call's ``durationMs``.

Example::

    executor = ToolExecutor(ToolSettings(), workspace=Path.cwd())
    record = executor.execute(call, env=sanitized_env, approval=True)
    record.success, record.duration_ms, record.result.llm_content
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ollm_cli.config.settings import CheckpointSettings, FileDiscoverySettings, ToolSettings
from ollm_cli.pipeline.checkpoints import WorkspaceCheckpoints
from ollm_cli.pipeline.discovery import FileDiscoveryService
from ollm_cli.pipeline.errors import OllmError, ToolError
from ollm_cli.pipeline.records import SessionToolCall, ToolCallPart, ToolResult
from ollm_cli.pipeline.tools._approval import ApprovalOutcome
from ollm_cli.pipeline.tools._base import Tool, ToolContext, ToolOutput
from ollm_cli.pipeline.tools._control_paths import ControlWatch
from ollm_cli.pipeline.tools._registry import ToolRegistry
from ollm_cli.pipeline.tools._sandbox import Sandbox
from ollm_cli.pipeline.tools.isolation._overlay import (
    WorkspaceOverlay,
    has_submounts,
    overlay_usable,
)

logger = logging.getLogger(__name__)


def describe_validation_error(tool: str, error: ValidationError) -> str:
    """One sentence naming each bad argument and what is wrong with it."""
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        if item["type"] == "missing":
            problems.append(f"'{field}' is required")
        elif item["type"] == "extra_forbidden":
            problems.append(f"'{field}' is not an argument of {tool}")
        else:
            problems.append(f"'{field}': {item['msg']}")
    return f"invalid arguments for {tool}: " + "; ".join(problems)


class ToolExecutor:
    """Runs tool calls in one worker: one :class:`Sandbox` per workspace, reused."""

    def __init__(
        self,
        settings: ToolSettings,
        registry: ToolRegistry | None = None,
        *,
        workspace: Path | None = None,
        discovery: FileDiscoverySettings | None = None,
        bwrap_path: str | Path | None = None,
        checkpoints: CheckpointSettings | None = None,
        checkpoints_root: Path | None = None,
    ) -> None:
        """``checkpoints`` and ``checkpoints_root`` (``snapshots.dataDir``): keep the
        previous state of the files each call of a session changes (both needed)."""
        self.settings = settings
        self.registry = registry if registry is not None else ToolRegistry.builtin()
        self.workspace = workspace
        self.discovery = FileDiscoveryService(discovery)
        self.bwrap_path = bwrap_path
        self._sandboxes: dict[Path, Sandbox] = {}
        self._lock = threading.Lock()
        self.checkpoint_settings = checkpoints
        self.checkpoints_root = checkpoints_root
        self._checkpoints: dict[str, WorkspaceCheckpoints] = {}

    def schemas(self) -> list[dict[str, Any]]:
        """The function-calling schemas of the registry's tools."""
        return self.registry.schemas()

    def sandbox(self, workspace: Path) -> Sandbox:
        """The sandbox of ``workspace`` (made once)."""
        key = workspace.expanduser().resolve()
        with self._lock:
            sandbox = self._sandboxes.get(key)
            if sandbox is None:
                sandbox = Sandbox(self.settings.sandbox, key, bwrap_path=self.bwrap_path)
                self._sandboxes[key] = sandbox
            return sandbox

    def execute(
        self,
        call: ToolCallPart,
        env: Mapping[str, str],
        approval: ApprovalOutcome | bool,
        *,
        workspace: Path | None = None,
        session_id: str | None = None,
    ) -> SessionToolCall:
        """Run ``call`` if approved and return its record (never raises for a tool failure).

        With ``session_id`` (and checkpoints configured), the previous state of the
        files the call changes is kept in that session's workspace checkpoints."""
        started = time.perf_counter()
        output = self._output(call, env, approval, workspace, session_id)
        duration_ms = (time.perf_counter() - started) * 1000
        if not output.success:
            logger.info("tools: %s failed after %.0f ms", call.name, duration_ms)
        return SessionToolCall(
            id=call.id,
            name=call.name,
            args=call.args,
            result=ToolResult(llm_content=output.llm_content, return_display=output.return_display),
            duration_ms=duration_ms,
            success=output.success,
            error=output.error,
        )

    def _output(
        self,
        call: ToolCallPart,
        env: Mapping[str, str],
        approval: ApprovalOutcome | bool,
        workspace: Path | None,
        session_id: str | None = None,
    ) -> ToolOutput:
        if isinstance(approval, bool):
            approval = ApprovalOutcome(
                approved=approval,
                decision="allow" if approval else "deny",
                reason="approved" if approval else f"the {call.name} call was not approved",
            )
        if not approval.approved:
            return ToolOutput.failure(f"not run: {approval.reason}", f"{call.name}: denied")
        tool = self.registry.get(call.name)
        if tool is None:
            return ToolOutput.failure(
                f"there is no tool named {call.name!r}; the tools are "
                + ", ".join(self.registry.names())
            )
        try:
            args = tool.parse(call.args)
        except ValidationError as error:
            return ToolOutput.failure(describe_validation_error(call.name, error))
        root = workspace or self.workspace
        try:
            if root is None:
                raise ToolError(
                    "no workspace was given for this tool call",
                    hint="start the tool worker with the workspace",
                )
            ctx = ToolContext(
                workspace=root.expanduser().resolve(),
                env=dict(env),
                sandbox=self.sandbox(root),
                discovery=self.discovery,
            )
            checkpoints = self.checkpoints_of(session_id)
            paths = tool.changed_paths(args) if checkpoints is not None else []
            if checkpoints is None or paths == []:
                return self._run(tool, args, ctx)
            return self._run_checkpointed(checkpoints, call.id, tool, args, ctx, paths)
        except OllmError as error:
            return ToolOutput.failure(str(error))

    def checkpoints_of(self, session_id: str | None) -> WorkspaceCheckpoints | None:
        """The workspace checkpoints of ``session_id`` (None when they are off)."""
        settings, root = self.checkpoint_settings, self.checkpoints_root
        if session_id is None or settings is None or root is None or not settings.enabled:
            return None
        with self._lock:
            found = self._checkpoints.get(session_id)
            if found is None:
                found = WorkspaceCheckpoints.of_session(root, session_id, settings)
                self._checkpoints[session_id] = found
            return found

    def _run_checkpointed(
        self,
        checkpoints: WorkspaceCheckpoints,
        call_id: str,
        tool: Tool[Any],
        args: Any,
        ctx: ToolContext,
        paths: list[str] | None,
    ) -> ToolOutput:
        """Run the tool between keeping what it may change and recording what it did.

        A checkpoint that cannot be kept never stops the tool: it is logged, and a
        rewind past this call says its files cannot be restored."""
        try:
            if paths is None and self._overlay_fits(checkpoints, tool, ctx):
                pending = checkpoints.before_layer(ctx.workspace)
                ctx = replace(
                    ctx,
                    overlay=WorkspaceOverlay(
                        ctx.workspace,
                        pending.upper,
                        pending.work,
                        settle=partial(checkpoints.settle, pending),
                    ),
                )
            else:
                pending = checkpoints.before(ctx.workspace, paths)
        except (OSError, OllmError) as error:
            logger.warning("tools: no checkpoint before %s: %s", tool.name, error)
            return self._run(tool, args, ctx)
        try:
            return self._run(tool, args, ctx)
        finally:
            try:
                checkpoints.after(pending, call_id)
            except (OSError, OllmError) as error:
                logger.warning("tools: the checkpoint of %s is not recorded: %s", tool.name, error)

    @staticmethod
    def _overlay_fits(checkpoints: WorkspaceCheckpoints, tool: Tool[Any], ctx: ToolContext) -> bool:
        """Whether the call's command can run on an overlay of the workspace, so that
        its checkpoint costs what it changed, not what the workspace holds."""
        return (
            tool.runs_in_overlay
            and ctx.sandbox.available
            and overlay_usable(ctx.workspace, checkpoints.layers)
            and not has_submounts(ctx.workspace)
        )

    @classmethod
    def _run(cls, tool: Tool[Any], args: Any, ctx: ToolContext) -> ToolOutput:
        if getattr(tool, "guards_control_paths", False):
            return cls._run_tool(tool, args, ctx)
        # A tool an extension adds runs here, unsandboxed: what it does to the
        # workspace's control paths is undone after it, and said.
        watch = ControlWatch(ctx.workspace)
        try:
            output = cls._run_tool(tool, args, ctx)
        finally:
            notes = watch.finish()
        if not notes:
            return output
        error = (
            f"{tool.name} changed the workspace's control paths (.ollm, .git), which "
            f"hold configuration OLLM or git runs later; undone: {'; '.join(notes)}"
        )
        return ToolOutput(
            llm_content=f"{output.llm_content}\nError: {error}",
            return_display=output.return_display,
            success=False,
            error=error,
        )

    @staticmethod
    def _run_tool(tool: Tool[Any], args: Any, ctx: ToolContext) -> ToolOutput:
        try:
            return tool.run(args, ctx)
        except OllmError:
            raise
        except OSError as error:
            reason = error.strerror or type(error).__name__
            where = f" ({Path(error.filename).name})" if error.filename else ""
            return ToolOutput.failure(f"{tool.name} failed: {reason}{where}")
        except Exception as error:
            logger.exception("tools: %s raised %s", tool.name, type(error).__name__)
            return ToolOutput.failure(
                f"{tool.name} failed unexpectedly ({type(error).__name__}); this is a bug "
                f"in the tool, please report it"
            )
