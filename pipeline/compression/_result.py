"""What one compression produced, and how it is applied to a context and to metadata."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from ollm_cli.base.deferred_model import DeferredModel
from ollm_cli.pipeline.compression._active_context import ActiveContext
from ollm_cli.pipeline.compression._budget import Strategy
from ollm_cli.pipeline.records import CompressionEvent, SessionMetadata, Timestamp, now_iso


class CompressionResult(DeferredModel):
    """What one compression produced, ready to be applied to a later context.

    ``strategy`` is what was done (``truncate`` after a fallback) and
    ``requested_strategy`` what was asked; ``fallback_reason`` says why they
    differ. Token counts cover the system prompt, checkpoints and messages.
    """

    model_config = ConfigDict(defer_build=True)  # built when first used, not at import

    context: ActiveContext
    original_tokens: int
    compressed_tokens: int
    strategy: Strategy
    requested_strategy: Strategy
    fallback_reason: str | None = None
    notes: list[str] = Field(default_factory=list)
    based_on_len: int
    base_fingerprint: str
    summary_tokens: int | None = None
    timestamp: Timestamp = Field(default_factory=now_iso)

    @property
    def reduced(self) -> bool:
        """Whether the compression made the context smaller."""
        return self.compressed_tokens < self.original_tokens

    @property
    def event(self) -> CompressionEvent:
        """The entry for the session's ``compressionHistory``, with the checkpoint."""
        checkpoint = self.context.checkpoint()
        checkpoint.summary_tokens = self.summary_tokens
        return CompressionEvent(
            timestamp=self.timestamp,
            strategy=self.strategy,
            tokens_before=self.original_tokens,
            tokens_after=self.compressed_tokens,
            fallback=self.fallback_reason,
            requested_strategy=self.requested_strategy,
            notes=list(self.notes),
            checkpoint=checkpoint,
        )

    def apply(self, current: ActiveContext) -> ActiveContext | None:
        """The compressed context with the messages recorded since appended.

        ``current`` is the context as it is now: the one compressed plus the
        messages appended after ``based_on_len``. When nothing was freed, only
        the compression state (failures, stall guard) is carried over. Returns
        ``None`` (keep ``current``) when there is nothing to change, or when the
        history has moved in another way (a restore, another compression, an
        emergency truncation).
        The system prompt is ``current``'s, which may have changed meanwhile.
        """
        if len(current.messages) < self.based_on_len:
            return None
        if current.fingerprint(self.based_on_len) != self.base_fingerprint:
            return None
        state = {
            "summary_failures": self.context.summary_failures,
            "compress_after": self.context.compress_after,
        }
        if not self.reduced:
            unchanged = all(getattr(current, key) == value for key, value in state.items())
            return None if unchanged else current.model_copy(update=state)
        newer = current.messages[self.based_on_len :]
        return self.context.model_copy(
            update={
                "system_prompt": current.system_prompt,
                "checkpoints": list(self.context.checkpoints),
                "messages": [*self.context.messages, *newer],
            }
        )


def apply_compression_to_metadata(
    metadata: SessionMetadata, event: CompressionEvent
) -> SessionMetadata:
    """``metadata`` after one more compression: ``compressionCount`` + 1 and
    ``event`` appended to ``compressionHistory`` (Requirement 3.8)."""
    return metadata.model_copy(
        update={
            "compression_count": metadata.compression_count + 1,
            "compression_history": [*metadata.compression_history, event],
        }
    )
