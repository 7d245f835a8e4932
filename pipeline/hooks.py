"""Lifecycle hooks (spec 004): commands run on pipeline events.

Each hook names an event (``session:start``, ``session:message``, ``tool:call``,
``loop:detected``, ``compression:started``, ``compression:finished``,
``session:end``) and a shell command. When the event is published, the command
runs with the event as JSON on stdin, with the sanitized environment and a
timeout; what it prints on stdout becomes a context entry of source ``hook``
for that session, so the model sees it from the next request on. A failing or
slow hook is logged and skipped, never fatal.

Example (``~/.ollm/config.yaml``)::

    hooks:
      - event: session:start
        command: git log --oneline -5
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson

from ollm_cli.config.settings import HookSettings
from ollm_cli.pipeline.context_client import ContextClient
from ollm_cli.pipeline.events import EventBus, PipelineEvent

logger = logging.getLogger(__name__)
MAX_HOOK_OUTPUT = 16 * 1024


class HookRunner:
    """Subscribes to an :class:`EventBus` and runs the matching hooks."""

    def __init__(
        self,
        hooks: list[HookSettings],
        context: ContextClient,
        *,
        workspace: Path,
        environment: Callable[[], Mapping[str, str]],
    ) -> None:
        self.hooks = sorted(hooks, key=lambda h: -h.priority)
        self.context = context
        self.workspace = workspace
        self.environment = environment
        self._pending: dict[str, set[asyncio.Task[None]]] = defaultdict(set)
        self.failures = 0

    def attach(self, bus: EventBus) -> None:
        """Start listening to the events hooks are configured for."""
        kinds = {hook.event for hook in self.hooks}
        if kinds:
            bus.subscribe(self.on_event, kinds)

    def listens_to(self, kind: str) -> bool:
        """Whether a hook runs on events of ``kind`` (e.g. ``session:message``)."""
        return any(hook.event == kind for hook in self.hooks)

    def on_event(self, event: PipelineEvent) -> None:
        """Start the hooks of ``event`` (in the background of the running loop)."""
        for index, hook in enumerate(self.hooks):
            if hook.event != event.kind:
                continue
            task = asyncio.ensure_future(self._run(index, hook, event))
            pending = self._pending[event.session_id]
            pending.add(task)
            task.add_done_callback(pending.discard)

    async def settle(self, session_id: str) -> None:
        """Wait for the hooks still running for ``session_id`` (each has its timeout)."""
        pending = list(self._pending.get(session_id, ()))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _run(self, index: int, hook: HookSettings, event: PipelineEvent) -> None:
        payload = orjson.dumps(event.to_hook_payload())
        try:
            process = await asyncio.create_subprocess_exec(
                "/bin/sh",
                "-c",
                hook.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=self.workspace,
                env=dict(self.environment()),
                start_new_session=True,
            )
        except OSError as error:
            self.failures += 1
            logger.warning("hook %d (%s) could not start: %s", index, hook.event, error.strerror)
            return
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(payload), hook.timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            self.failures += 1
            logger.warning("hook %d (%s) timed out after %.1f s", index, hook.event, hook.timeout_s)
            return
        if process.returncode != 0:
            self.failures += 1
            logger.warning("hook %d (%s) exited with %s", index, hook.event, process.returncode)
            return
        text = stdout[:MAX_HOOK_OUTPUT].decode("utf-8", "replace").strip()
        if text:
            await self.context.add(
                event.session_id,
                f"hook:{hook.event}:{index}",
                text,
                priority=hook.priority,
                source="hook",
            )
