"""The compression actor: summaries and truncation off the chat's critical path.

The coordinator hands it a copy of a conversation's active context after a
turn ends and carries on; the result is applied by a later turn if the history
has not moved past it. Summaries are written by the conversation's model
(:class:`~ollm_cli.pipeline.compression.ModelSummarizer`), and a snapshot of
the context is saved before each compression. ``/snapshot`` and snapshot
restores go through here too.
"""

from __future__ import annotations

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import (
    ActiveContext,
    ChatCompressionService,
    CompressionResult,
    ModelSummarizer,
    SnapshotInfo,
    SnapshotManager,
    TokenCounter,
)
from ollm_cli.pipeline.environment import Redactor


class CompressionShell(ShellBase):
    """Gives the ChatCompressionService and the SnapshotManager an inbox."""

    def __init__(self, settings: OllmSettings) -> None:
        self.summarizer = ModelSummarizer(settings.provider)
        redactor = Redactor() if settings.services.session.redact_secrets else None
        self.snapshots = SnapshotManager(settings.snapshots, redactor=redactor)
        self.service = ChatCompressionService(
            settings.services.compression,
            TokenCounter(),
            self.summarizer,
            snapshots=self.snapshots,
        )

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
        self.summarizer.use(model, window)
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
        return self.snapshots.manual_snapshot(session_id, context, token_count)

    def auto_snapshot(
        self, session_id: str, context: ActiveContext, token_count: int, share: float
    ) -> SnapshotInfo:
        return self.snapshots.automatic_snapshot(session_id, context, token_count, share)

    def add_redaction_values(self, values: dict[str, str]) -> int:
        """Also mask these secret values (those the sanitizer removed, by variable
        name) in snapshots, as the recording shell does in sessions."""
        redactor = self.snapshots.redactor
        return redactor.add_values(values) if redactor is not None else 0

    def take_active_override(self, session_id: str) -> ActiveContext | None:
        """A context restored from a snapshot for this session, once."""
        return self.snapshots.take_active_override(session_id)

    def drop_session(self, session_id: str) -> None:
        self.service.drop_session(session_id)

    def close(self) -> None:
        self.summarizer.close()
