"""The compression actor: summaries and truncation off the chat's critical path.

The coordinator hands it a copy of a conversation's active context after a
turn ends and carries on; the result is applied by a later turn if the history
has not moved past it. Summaries are written by this actor's own provider
(created on first use), and a snapshot of the context is saved before each
compression. ``/snapshot`` and snapshot restores go through here too.
"""

from __future__ import annotations

import threading

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import (
    ActiveContext,
    ChatCompressionService,
    CompressionResult,
    SnapshotInfo,
    SnapshotManager,
    TokenCounter,
)
from ollm_cli.pipeline.providers import ChatRequest, Provider, create_provider
from ollm_cli.pipeline.records import SessionMessage


class CompressionShell(ShellBase):
    """Gives the ChatCompressionService and the SnapshotManager an inbox."""

    def __init__(self, settings: OllmSettings) -> None:
        self.settings = settings
        self.counter = TokenCounter()
        self.snapshots = SnapshotManager(settings.snapshots)
        self.service = ChatCompressionService(
            settings.services.compression,
            self.counter,
            self._summarize,
            snapshots=self.snapshots,
        )
        self._provider: Provider | None = None
        self._lock = threading.Lock()
        self._models = threading.local()

    def _summarize(self, prompt: str, max_tokens: int) -> str:
        with self._lock:
            if self._provider is None:
                self._provider = create_provider(self.settings.provider)
            provider = self._provider
        model = getattr(self._models, "current", None) or provider.default_model()
        request = ChatRequest(
            model=model,
            messages=[SessionMessage.user(prompt)],
            max_tokens=max_tokens,
            temperature=0.2,
            num_ctx=getattr(self._models, "window", None),
        )
        return provider.complete(request)

    def compress(
        self,
        session_id: str,
        context: ActiveContext,
        *,
        window: int,
        model: str,
        force: bool = False,
        focus: str | None = None,
        extra_tokens: int = 0,
    ) -> CompressionResult:
        # the summary is asked of the conversation's model with the same window, so a
        # server like Ollama does not reload the model for it
        self._models.current = model
        self._models.window = window
        return self.service.compress(
            context,
            window=window,
            force=force,
            focus=focus,
            model=model,
            session_id=session_id,
            extra_tokens=extra_tokens,
        )

    def snapshot(self, session_id: str, context: ActiveContext, token_count: int) -> SnapshotInfo:
        """``/snapshot``: save the active context as it is now."""
        return self.snapshots.create_snapshot(
            session_id,
            context,
            token_count=token_count,
            summary=f"manual snapshot of {len(context.messages)} messages",
            reason="manual",
        )

    def auto_snapshot(
        self, session_id: str, context: ActiveContext, token_count: int, share: float
    ) -> SnapshotInfo:
        """Spec 003's automatic snapshot: usage reached ``snapshots.autoThreshold``
        (``share`` of the window) and no compression took one."""
        return self.snapshots.create_snapshot(
            session_id,
            context,
            token_count=token_count,
            summary=f"at {share:.0%} of the window ({token_count} tokens)",
            reason="auto",
        )

    def take_active_override(self, session_id: str) -> ActiveContext | None:
        """A context restored from a snapshot for this session, once."""
        return self.snapshots.take_active_override(session_id)

    def drop_session(self, session_id: str) -> None:
        self.service.drop_session(session_id)

    def close(self) -> None:
        with self._lock:
            if self._provider is not None:
                self._provider.close()
                self._provider = None
