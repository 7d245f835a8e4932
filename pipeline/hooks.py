"""Lifecycle hooks (spec 004): commands run on pipeline events.

Each hook names an event (``session:start``, ``session:message``, ``tool:call``,
``loop:detected``, ``compression:started``, ``compression:finished``,
``session:end``) and a shell command. When the event is published, the command
runs with the event as JSON on stdin, with the sanitized environment and a
timeout; what it prints on stdout becomes a context entry of source ``hook``
for that session, so the model sees it from the next request on. A failing or
slow hook is logged and skipped, never fatal.

A hook runs in the tool sandbox (:class:`~ollm_cli.pipeline.tools.Sandbox`
with ``tools.sandbox``'s limits, its ``wallTimeS`` replaced by the hook's
``timeoutS``): what it runs sees the workspace as a ``shell`` tool command does
(writable, but not its ``.ollm`` or ``.git``), the rest of the system read-only,
no ``$OLLM_HOME`` and no credential store. Trust pins the config's text, not
the files a hook names (``sh scripts/welcome.sh``, ``make``), which a tool, a
teammate or a ``git pull`` may change later: in the sandbox such a change can do
no more than a tool could. Where bubblewrap cannot run, a sandboxed hook is not
run (``tools.sandbox.allowUnsandboxed`` does not apply to hooks), and the session
is told once why and what to install. Only a hook of the user's own config may
say ``sandbox: false`` and run on the host as the user
(:data:`~ollm_cli.config.trust.USER_LEVEL_HOOK_KEYS`).

Example (``~/.ollm/config.yaml``)::

    hooks:
      - event: session:start
        command: git log --oneline -5
      - event: session:end
        command: notify-send "ollm: session ended"
        sandbox: false          # only here: your own config
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from ollm_cli.base.errors import OllmError
from ollm_cli.config.paths import user_config_path
from ollm_cli.config.settings import HookSettings, SandboxSettings
from ollm_cli.pipeline.context_client import ContextClient
from ollm_cli.pipeline.events import ContextNotice, EventBus, PipelineEvent

if TYPE_CHECKING:  # the sandbox is imported when a sandboxed hook first runs
    from ollm_cli.pipeline.tools import Sandbox, SandboxResult

logger = logging.getLogger(__name__)
MAX_HOOK_OUTPUT = 16 * 1024
SHELL = "/bin/sh"


class HookRunner:
    """Subscribes to an :class:`EventBus` and runs the matching hooks."""

    def __init__(
        self,
        hooks: list[HookSettings],
        context: ContextClient,
        *,
        workspace: Path,
        environment: Callable[[], Mapping[str, str]],
        sandbox: SandboxSettings,
    ) -> None:
        """``sandbox``: the limits of the tool sandbox (``tools.sandbox``) the hooks run in."""
        self.hooks = sorted(hooks, key=lambda h: -h.priority)
        self.context = context
        self.workspace = workspace
        self.environment = environment
        self.sandbox_settings = sandbox
        self._sandboxes: dict[float, Sandbox] = {}
        """One sandbox per hook timeout (its wall time), made at the first run."""
        self._pending: dict[str, set[asyncio.Task[None]]] = defaultdict(set)
        self._notices: dict[str, list[str]] = defaultdict(list)
        """What the session should be told at its next turn (a hook not run, and why)."""
        self._told_no_sandbox = False
        self._bus: EventBus | None = None
        self.failures = 0

    def attach(self, bus: EventBus) -> None:
        """Start listening to the events hooks are configured for."""
        self._bus = bus
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
        """Wait for the hooks still running for ``session_id`` (each has its timeout),
        then tell the session what it should know of them (a hook that could not run)."""
        pending = list(self._pending.get(session_id, ()))
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        notices = self._notices.pop(session_id, [])
        if self._bus is not None:
            for notice in notices:
                self._bus.publish(ContextNotice(session_id=session_id, message=notice))

    async def _run(self, index: int, hook: HookSettings, event: PipelineEvent) -> None:
        payload = orjson.dumps(event.to_hook_payload())
        if hook.sandbox:
            output = await self._run_sandboxed(index, hook, payload, event.session_id)
        else:
            output = await self._run_on_host(index, hook, payload)
        if output is None:
            self.failures += 1
            return
        text = output[:MAX_HOOK_OUTPUT].strip()
        if text:
            await self.context.add(
                event.session_id,
                f"hook:{hook.event}:{index}",
                text,
                priority=hook.priority,
                source="hook",
            )

    def _sandbox(self, hook: HookSettings) -> Sandbox:
        """The sandbox a hook with ``hook``'s timeout runs in (made once)."""
        sandbox = self._sandboxes.get(hook.timeout_s)
        if sandbox is None:
            from ollm_cli.pipeline.tools import Sandbox

            limits = self.sandbox_settings.model_copy(
                update={
                    "wall_time_s": hook.timeout_s,
                    "max_output_bytes": MAX_HOOK_OUTPUT,
                    "allow_unsandboxed": False,
                }
            )
            sandbox = Sandbox(limits, self.workspace)
            self._sandboxes[hook.timeout_s] = sandbox
        return sandbox

    async def _run_sandboxed(
        self, index: int, hook: HookSettings, payload: bytes, session_id: str
    ) -> str | None:
        """The hook's stdout, run in the sandbox; ``None`` when it failed or could not run."""
        env = dict(self.environment())

        def run(sandbox: Sandbox) -> SandboxResult | str:
            probe = sandbox.probe()  # a trial run of bubblewrap, once per process
            if not probe.ok:
                return probe.reason
            return sandbox.run([SHELL, "-c", hook.command], env=env, stdin=payload)

        try:
            result = await asyncio.to_thread(run, self._sandbox(hook))
        except OllmError as error:
            logger.warning("hook %d (%s) could not run: %s", index, hook.event, error.message)
            return None
        if isinstance(result, str):
            self._no_sandbox(index, hook, result, session_id)
            return None
        if result.undone:
            logger.warning(
                "hook %d (%s) changed the workspace's control paths, undone: %s",
                index,
                hook.event,
                "; ".join(result.undone),
            )
        if result.killed_by == "wall_time":
            logger.warning("hook %d (%s) timed out after %.1f s", index, hook.event, hook.timeout_s)
            return None
        if result.killed_by is not None:
            logger.warning("hook %d (%s) was stopped (%s)", index, hook.event, result.killed_by)
            return None
        if result.exit_code != 0:
            logger.warning("hook %d (%s) exited with %s", index, hook.event, result.exit_code)
            return None
        return result.stdout

    def _no_sandbox(self, index: int, hook: HookSettings, reason: str, session_id: str) -> None:
        """A sandboxed hook not run: logged each time, said to the session once."""
        logger.info("hook %d (%s) not run: no sandbox (%s)", index, hook.event, reason)
        if self._told_no_sandbox:
            return
        self._told_no_sandbox = True
        self._notices[session_id].append(
            f"hooks are not run: they run in the tool sandbox, and bubblewrap cannot run "
            f"here ({reason}). Install bubblewrap (apt install bubblewrap) and allow user "
            f"namespaces; a hook of your own config ({user_config_path()}) may instead say "
            f"`sandbox: false` to run on the host"
        )

    async def _run_on_host(self, index: int, hook: HookSettings, payload: bytes) -> str | None:
        """The stdout of a hook the user's own config runs outside the sandbox."""
        try:
            process = await asyncio.create_subprocess_exec(
                SHELL,
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
            logger.warning("hook %d (%s) could not start: %s", index, hook.event, error.strerror)
            return None
        try:
            stdout, _ = await asyncio.wait_for(process.communicate(payload), hook.timeout_s)
        except TimeoutError:
            process.kill()
            await process.wait()
            logger.warning("hook %d (%s) timed out after %.1f s", index, hook.event, hook.timeout_s)
            return None
        if process.returncode != 0:
            logger.warning("hook %d (%s) exited with %s", index, hook.event, process.returncode)
            return None
        return stdout[:MAX_HOOK_OUTPUT].decode("utf-8", "replace")
