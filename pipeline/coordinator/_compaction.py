"""When a conversation's context is compressed, and how the result comes back.

A compression runs in the background on a copy of the active context, started
at a turn end when the context is due (``services.compression``) or at once when
a resumed context is over its budget; a finished result is applied at the next
turn's start and never waited for, except by ``/compress``, by the first request
after a resume that would not fit the window, and at exit (up to
``finishOnExitS``). Until a summary is ready a request that would overflow the
window is cut for that request only. Every compression that changes the context
is recorded with the checkpoint it leaves, so a resume starts from it.

Spec 003's automatic snapshot is taken when usage crosses
``snapshots.autoThreshold`` and no compression takes one; a context restored
from a snapshot (``ollm snapshots restore``) becomes the session's checkpoint.

Example::

    scheduler = CompressionScheduler(runtime, settings, events, counter, telemetry, status)
    scheduler.schedule(conversation)  # at a turn end
    scheduler.apply_ready(conversation)  # at the next turn's start
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ollm_cli.actors.compression import CompressionShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import (
    ActiveContext,
    ChatCompressionService,
    CompressionResult,
    SnapshotInfo,
    TokenCounter,
)
from ollm_cli.pipeline.coordinator._conversation import Conversation
from ollm_cli.pipeline.errors import OllmError, PromptTooLargeError
from ollm_cli.pipeline.events import CompressionFinished, CompressionStarted, EventBus
from ollm_cli.pipeline.recording import RESTORE_TRIGGER
from ollm_cli.pipeline.records import CompressionEvent, SessionMessage
from ollm_cli.pipeline.runtime import Runtime
from ollm_cli.pipeline.telemetry import Telemetry, traced_compression

logger = logging.getLogger(__name__)

StatusCallback = Callable[[Conversation, Any], None]
"""Publishes the conversation's activity (``"compressing"``) as a status event."""


class CompressionScheduler:
    """Starts, applies, finishes and skips the compressions of a coordinator's conversations."""

    def __init__(
        self,
        runtime: Runtime,
        settings: OllmSettings,
        events: EventBus,
        counter: TokenCounter,
        telemetry: Telemetry,
        status: StatusCallback,
    ) -> None:
        self.runtime = runtime
        self.settings = settings
        self.events = events
        self.counter = counter
        self.telemetry = telemetry  # read by @traced_compression
        self.status = status
        self.compressor = ChatCompressionService(settings.services.compression, counter)

    # ------------------------------------------------------------------ starting

    def schedule(
        self,
        conversation: Conversation,
        *,
        force: bool = False,
        focus: str | None = None,
        trigger: str = "auto",
    ) -> None:
        """Start a compression in the background if one is due (or ``force``); else
        take the automatic snapshot if usage just crossed its threshold."""
        settings = self.settings.services.compression
        self.apply_ready(conversation)  # a finished result is never dropped
        if conversation.compression is not None:
            return
        if not force:
            due = settings.enabled and self.compressor.should_compress(
                conversation.context,
                window=conversation.info.context_window,
                extra_tokens=conversation.extra_tokens,
                model=conversation.model,
            )
            if not due:
                self._snapshot_if_due(conversation)
                return
        conversation.compression_tokens = conversation.context.message_tokens(self.counter)
        conversation.compression = asyncio.ensure_future(
            self._compress(conversation, force=force, focus=focus, trigger=trigger)
        )

    def _snapshot_if_due(self, conversation: Conversation) -> None:
        """Spec 003's automatic snapshot at ``snapshots.autoThreshold`` of the window
        when no compression takes one (a compression always snapshots first)."""
        snapshots = self.settings.snapshots
        window = conversation.info.context_window
        if not (snapshots.enabled and snapshots.auto_create) or window <= 0:
            return
        used = (
            self.counter.count_text(conversation.context.system_prompt)
            + conversation.extra_tokens
            + conversation.context.message_tokens(self.counter)
        )
        share = used * self.counter.ratio(conversation.model) / window
        above = share >= snapshots.auto_threshold
        crossed = above and not conversation.above_snapshot_threshold
        conversation.above_snapshot_threshold = above
        if not crossed:
            return
        live = conversation.context
        context = live.model_copy(
            update={"messages": list(live.messages), "checkpoints": list(live.checkpoints)}
        )
        conversation.run_in_background(self._auto_snapshot(conversation, context, used, share))

    async def _auto_snapshot(
        self, conversation: Conversation, context: ActiveContext, tokens: int, share: float
    ) -> None:
        try:
            await self.runtime.compression[0].call(
                CompressionShell.auto_snapshot, conversation.session_id, context, tokens, share
            )
        except OllmError as error:
            logger.warning("automatic snapshot of %s failed: %s", conversation.session_id, error)

    @traced_compression
    async def _compress(
        self, conversation: Conversation, *, force: bool, focus: str | None, trigger: str = "auto"
    ) -> CompressionResult | None:
        sid = conversation.session_id
        tokens = conversation.context.message_tokens(self.counter)
        self.events.publish(
            CompressionStarted(
                session_id=sid,
                strategy=self.settings.services.compression.strategy,
                tokens=tokens,
            )
        )
        self.status(conversation, "compressing")
        try:
            result: CompressionResult | None = await self.runtime.compressor().call(
                CompressionShell.compress,
                sid,
                conversation.context.model_copy(deep=True),
                window=conversation.info.context_window,
                model=conversation.model,
                force=force,
                focus=focus,
                extra_tokens=conversation.extra_tokens,
            )
        except Exception as error:
            logger.warning("compression of %s failed: %s", sid, error)
            self.events.publish(
                CompressionFinished(
                    session_id=sid,
                    strategy="none",
                    tokens_before=tokens,
                    tokens_after=tokens,
                    error=str(error),
                )
            )
            return None
        if result is None:
            return None
        self.events.publish(
            CompressionFinished(
                session_id=sid,
                strategy=result.strategy,
                tokens_before=result.original_tokens,
                tokens_after=result.compressed_tokens,
                fallback=result.fallback_reason,
            )
        )
        # every compression is recorded with the checkpoint it leaves (a fallback
        # to truncation too), so that compressionCount is the truth and a resume,
        # in this process or another, starts from it
        if not result.reduced:  # nothing changed in the context: nothing to record
            return result
        event = result.event.model_copy(
            update={"model": conversation.model, "trigger": trigger, "focus": focus}
        )
        try:
            await self.runtime.recording.call(RecordingShell.record_compression, sid, event)
        except OllmError as error:
            logger.warning("recording the compression of %s failed: %s", sid, error)
        return result

    # ------------------------------------------------------------------ applying

    def apply_ready(self, conversation: Conversation) -> None:
        """A finished compression's context replaces the active one (never waited for)."""
        task = conversation.compression
        if task is None or not task.done():
            return
        conversation.compression = None
        if task.cancelled() or task.exception() is not None:
            return
        result = task.result()
        if result is None:
            return
        applied = result.apply(conversation.context)
        if applied is not None:
            conversation.context = applied
            if result.notes:  # what the compression left out or cut, said with the turn
                conversation.notices.append(
                    f"compression ({result.strategy}): {'; '.join(result.notes)} "
                    "(the session file keeps every message)"
                )

    def fitting_context(self, conversation: Conversation) -> ActiveContext:
        """The context of the next request: the active context, cut at once if it
        would overflow the window before a summary is ready. The cut is for this
        request only, so a compression still running on the whole context applies.
        What the cut left out goes to the conversation's notices (see
        :meth:`take_notices`); the request's size is kept for the status line."""
        notes: list[str] = []
        fitted = self.compressor.emergency_truncate(
            conversation.context,
            window=conversation.info.context_window,
            extra_tokens=conversation.extra_tokens,
            model=conversation.model,
            notes=notes,
        )
        sent = fitted or conversation.context
        conversation.sent_tokens = self.request_tokens(conversation, sent)
        if notes:
            conversation.notices.append(
                f"to fit the model's window of {conversation.info.context_window} tokens, "
                f"this request {'; '.join(notes)} (the session file keeps every message)"
            )
        return sent

    @staticmethod
    def take_notices(conversation: Conversation) -> list[str]:
        """The conversation's notices since the last call, each once, in order: for
        the turn's result (the chat prints them, ``--json`` carries them)."""
        notices = list(dict.fromkeys(conversation.notices))
        conversation.notices.clear()
        return notices

    def request_tokens(self, conversation: Conversation, sent: ActiveContext | None = None) -> int:
        """A request's size in the model's tokens as estimated: the system prompt,
        what every request adds (tools, context), and ``sent`` (the whole context
        when not given)."""
        context = conversation.context if sent is None else sent
        estimate = self.compressor.request_size(context, extra_tokens=conversation.extra_tokens)
        return int(estimate * self.counter.ratio(conversation.model))

    def status_tokens(self, conversation: Conversation) -> int:
        """What the status line counts: the last request as sent (after any cut),
        or the next one's whole size before the first request."""
        return conversation.sent_tokens or self.request_tokens(conversation)

    def check_prompt(self, conversation: Conversation, text: str, extra_tokens: int = 0) -> None:
        """Refuse ``text`` when the window cannot hold it even alone (with the system
        prompt, ``extra_tokens`` of tools and context, and the answer's reserve):
        before anything is recorded or sent, saying the sizes. Older messages can be
        compressed to make room; the new message cannot be, without consent."""
        window = conversation.info.context_window
        if window <= 0:
            return
        extra = max(conversation.extra_tokens, extra_tokens)
        budget = self.compressor.context_budget(
            conversation.context, window=window, model=conversation.model, extra_tokens=extra
        )
        tokens = self.counter.count_message(SessionMessage.user(text))
        if tokens <= budget.room:
            return
        ratio = self.counter.ratio(conversation.model)
        size, room = int(tokens * ratio), int(budget.room * ratio)
        raise PromptTooLargeError(
            f"the message is about {size} tokens, but the model's window is {window} tokens "
            f"and leaves about {room} for it (after the system prompt, tools, context and "
            "the answer's reserve); it was not sent or recorded",
            hint="shorten it (or put it in a file the model can read with its tools), "
            "use a model with a larger window, or pass --truncate-prompt to send it with "
            "its middle cut out",
            prompt_tokens=size,
            room_tokens=room,
            window=window,
            room_estimate=budget.room,
        )

    # ------------------------------------------------------------------ resuming

    def fit_resumed(self, conversation: Conversation) -> None:
        """A resumed context over its budget is compressed at once; one that would
        not even fit the window makes the first request wait for that compression
        (nothing is cut silently). Resumed from a checkpoint, it usually fits."""
        overflows = self.compressor.overflows(
            conversation.context, window=conversation.info.context_window, model=conversation.model
        )
        self.schedule(conversation, force=overflows, trigger="resume")
        conversation.await_compression = True

    async def fit_first_request(self, conversation: Conversation) -> None:
        """The first request after a resume: a context that would not fit the window
        (with this turn's message and context additions) waits for a compression
        instead of being cut."""
        for _ in range(2):
            if not self.compressor.overflows(
                conversation.context,
                window=conversation.info.context_window,
                extra_tokens=conversation.extra_tokens,
                model=conversation.model,
            ):
                return
            if conversation.compression is None:
                self.schedule(conversation, force=True, trigger="resume")
            if conversation.compression is None:
                return
            await asyncio.gather(conversation.compression, return_exceptions=True)
            self.apply_ready(conversation)

    async def restored_context(
        self, sid: str, current: ActiveContext, message_count: int
    ) -> ActiveContext:
        """``current``, or the context restored from a snapshot (``ollm snapshots
        restore``) when one waits for the session, kept as the session's latest
        checkpoint so that later resumes use it too.

        Its messages all become the head (by position where they are the
        session's own); the messages recorded after the snapshot are left out."""
        restored = await self.runtime.compression[0].call(
            CompressionShell.take_active_override, sid
        )
        if not isinstance(restored, ActiveContext):
            return current
        context = restored.model_copy(
            update={
                "system_prompt": current.system_prompt,
                "messages": list(restored.messages),
                "covers_through": message_count,
                "covered_head": len(restored.messages),
                "head_positions": [
                    restored.head_position(i) for i in range(len(restored.messages))
                ],
            }
        )
        tokens = context.message_tokens(self.counter)
        event = CompressionEvent(
            strategy=RESTORE_TRIGGER,
            tokens_before=current.message_tokens(self.counter),
            tokens_after=tokens,
            trigger=RESTORE_TRIGGER,
            checkpoint=context.checkpoint(),
        )
        await self.runtime.recording.call(RecordingShell.record_compression, sid, event)
        logger.info("session %s resumes from a restored snapshot (%d tokens)", sid, tokens)
        return context

    # ---------------------------------------------------------------- at exit

    def pending(self, conversation: Conversation) -> str | None:
        """What the conversation's running compression does (``None``: none runs)."""
        task = conversation.compression
        if task is None or task.done():
            return None
        return (
            f"finishing the compression of session {conversation.session_id[:8]} "
            f"({conversation.compression_tokens} tokens, "
            f"{self.settings.services.compression.strategy})"
        )

    async def finish(self, conversation: Conversation, *, cancel: bool = True) -> bool:
        """Wait for the running compression (at most ``finishOnExitS``) and apply it;
        False if it did not finish in time (``cancel``: say it will be given up)."""
        task = conversation.compression
        if task is None:
            return True
        if not task.done():
            limit = self.settings.services.compression.finish_on_exit_s
            await asyncio.wait({task}, timeout=limit)
        if not task.done():
            if cancel:
                logger.warning(
                    "compression of %s did not finish within %.0f s "
                    "(services.compression.finishOnExitS); the next resume compresses again",
                    conversation.session_id,
                    self.settings.services.compression.finish_on_exit_s,
                )
            return False
        self.apply_ready(conversation)
        return True

    async def skip(self, conversation: Conversation) -> None:
        """Give up the running compression: the next resume compresses again from
        the last recorded checkpoint."""
        task = conversation.compression
        if task is not None and not task.done():
            logger.warning(
                "compression of %s skipped at exit; the next resume compresses again",
                conversation.session_id,
            )
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    # ------------------------------------------------------------ on request

    async def compress_now(
        self, conversation: Conversation, focus: str | None = None
    ) -> CompressionResult | None:
        """Compress now and wait for it (after one already running)."""
        if conversation.compression is not None:
            await asyncio.gather(conversation.compression, return_exceptions=True)
        self.schedule(conversation, force=True, focus=focus, trigger="manual")
        assert conversation.compression is not None
        result = await conversation.compression
        self.apply_ready(conversation)
        return result

    async def snapshot_now(self, conversation: Conversation) -> SnapshotInfo:
        """Save the active context as it is now."""
        tokens = conversation.context.message_tokens(self.counter)
        info: SnapshotInfo = await self.runtime.compression[0].call(
            CompressionShell.snapshot, conversation.session_id, conversation.context, tokens
        )
        return info
