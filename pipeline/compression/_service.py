"""The ChatCompressionService: keeping a long conversation inside the model's window.

Compression changes only what is sent to the model (the *active context*),
never the session file (spec 003). The active context is the system prompt,
the checkpoints (summaries of the earlier conversation) and the live messages.

The budget is spec 003's: ``available = window - reserve for the answer -
system prompt - checkpoints``; compression is due at ``threshold`` (0.8) of it.
A compression brings the checkpoints and messages down to a target well below
the trigger, so that it does not fire again at the next turn.

Strategies (Requirement 3):

- ``truncate``: the oldest messages go first (tool results are shortened before
  anything is dropped); no model is involved.
- ``summarize``: the model writes one structured summary of as much of the older
  conversation as must go, merged with the earlier summary; more of the recent
  conversation stays verbatim when the target leaves room.
- ``hybrid``: everything older than the newest ``preserveRecent`` tokens is
  summarized; those newest tokens stay verbatim.

In every strategy the system prompt and the newest ``preserveRecent`` tokens
are not touched, and user messages stay verbatim (checkpoint + all user
messages + recent, as 003 lays out) unless even that cannot fit the window, in
which case the oldest other content goes first and the result says so.

A summary is accepted only if it is smaller than what it replaces and is not
degenerate (empty, or repeating itself); otherwise the compression falls back
to truncate and the failure is logged. After ``maxFailures`` failures in a row,
automatic summarizing pauses until the user runs ``/compress`` (``force``). A
compression that frees almost nothing does not repeat at the next turn.

The summarizer is injected (``summarize_fn(prompt, max_tokens) -> text``); the
pipeline connects it to the model provider. This class holds no lock while the
summarizer runs, so :meth:`should_compress` and :meth:`emergency_truncate` never
wait for a summary.

Example::

    service = ChatCompressionService(settings.services.compression, counter, summarize_fn)
    if service.should_compress(context, window=8192):
        result = service.compress(context, window=8192, session_id=sid)   # in the background
    ...
    context = result.apply(context) or context   # at the start of the next turn
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ollm_cli.config.settings import CompressionSettings
from ollm_cli.pipeline.compression._active_context import ActiveContext
from ollm_cli.pipeline.compression._budget import MAX_RESERVE_FRACTION, Budget, Strategy
from ollm_cli.pipeline.compression._result import CompressionResult, apply_compression_to_metadata
from ollm_cli.pipeline.compression._summarizing import Summarizing
from ollm_cli.pipeline.compression._summary import (
    SummarizeFn,
    SummaryFailed,
    build_summary_prompt,
    summary_problem,
)
from ollm_cli.pipeline.compression._tokens import MESSAGE_OVERHEAD, TokenCounter
from ollm_cli.pipeline.compression._truncation import Truncation
from ollm_cli.pipeline.records import SessionMessage

if TYPE_CHECKING:
    from ollm_cli.pipeline.compression._snapshots import SnapshotManager

__all__ = [
    "Budget",
    "ChatCompressionService",
    "CompressionResult",
    "Strategy",
    "SummarizeFn",
    "apply_compression_to_metadata",
    "build_summary_prompt",
    "summary_problem",
]

logger = logging.getLogger(__name__)

MIN_FREED_FRACTION = 0.1
"""A compression freeing less than this share of the context has stalled."""

STALL_MARGIN_FRACTION = 0.1
"""After a stall, compression waits until the context grew by this share of the room."""


class ChatCompressionService:
    """Compression of active contexts (Requirement 3, properties 10 to 13).

    It keeps no state of its own: the failure counter, the pause and the stall
    guard travel in each :class:`ActiveContext`, so one instance (or several
    actors) can serve many sessions, and the coordinator's cheap checks see what
    the compression actor decided. ``snapshots``, if given, gets an automatic
    snapshot of the context before each compression of a session.
    """

    def __init__(
        self,
        settings: CompressionSettings | None = None,
        counter: TokenCounter | None = None,
        summarize_fn: SummarizeFn | None = None,
        *,
        snapshots: SnapshotManager | None = None,
    ) -> None:
        self.settings = settings or CompressionSettings()
        self.counter = counter or TokenCounter()
        self.summarize_fn = summarize_fn
        self.snapshots = snapshots
        self.truncation = Truncation(self.counter)
        self.summarizing = Summarizing(self.settings, self.counter, self.truncation)

    def is_paused(self, context: ActiveContext) -> bool:
        """Whether automatic summarizing is paused for this conversation (until ``/compress``)."""
        return context.summary_failures >= self.settings.max_failures

    def drop_session(self, session_id: str) -> None:
        """Nothing to forget: a conversation's compression state is in its context."""
        logger.debug("compression: session %s ended", session_id)

    # -- budget ----------------------------------------------------------------

    def budget(
        self,
        window: int,
        system_prompt_tokens: int,
        checkpoint_tokens: int = 0,
        *,
        model: str | None = None,
    ) -> Budget:
        """Spec 003's budget for a window of ``window`` real tokens of ``model``.

        Token arguments are our estimates; the window is converted to estimated
        tokens with the model's calibration ratio.
        """
        ratio = self.counter.ratio(model)
        window_est = int(max(0, window) / ratio)
        reserve = min(self.settings.response_reserve, int(window_est * MAX_RESERVE_FRACTION))
        return Budget(
            window=window_est,
            response_reserve=reserve,
            system_prompt_tokens=max(0, system_prompt_tokens),
            checkpoint_tokens=max(0, checkpoint_tokens),
            threshold=self.settings.threshold,
            preserve_recent=self.settings.preserve_recent,
        )

    def _system_tokens(self, system_prompt: str, extra_tokens: int = 0) -> int:
        base = MESSAGE_OVERHEAD + self.counter.count_text(system_prompt) if system_prompt else 0
        return base + max(0, extra_tokens)

    def context_budget(
        self,
        context: ActiveContext,
        *,
        window: int,
        model: str | None = None,
        extra_tokens: int = 0,
    ) -> Budget:
        """The budget of ``context`` (``extra_tokens``: additions to the system prompt)."""
        return self.budget(
            window,
            self._system_tokens(context.system_prompt, extra_tokens),
            self.counter.count_messages(context.checkpoints),
            model=model,
        )

    def should_compress(
        self,
        context: ActiveContext | int,
        *,
        window: int,
        system_prompt_tokens: int = 0,
        checkpoint_tokens: int = 0,
        model: str | None = None,
        extra_tokens: int = 0,
    ) -> bool:
        """Whether compression is due (Requirement 3.7, property 10).

        ``context`` is an active context, or the message tokens already counted
        (then give ``system_prompt_tokens`` and ``checkpoint_tokens``). False
        when compression is disabled, and after a compression that freed almost
        nothing until the context has grown past its ``compress_after``. Cheap:
        cached counts.
        """
        if not self.settings.enabled:
            return False
        if isinstance(context, ActiveContext):
            budget = self.context_budget(
                context, window=window, model=model, extra_tokens=extra_tokens
            )
            tokens = self.counter.count_messages(context.messages)
            hold = context.compress_after
        else:
            budget = self.budget(
                window, system_prompt_tokens + extra_tokens, checkpoint_tokens, model=model
            )
            tokens = context
            hold = None
        if tokens <= budget.trigger:
            return False
        return hold is None or tokens + budget.checkpoint_tokens > hold

    # -- compression ----------------------------------------------------------

    def compress(
        self,
        messages: ActiveContext | Sequence[SessionMessage],
        *,
        window: int,
        system_prompt: str | None = None,
        strategy: Strategy | None = None,
        focus: str | None = None,
        force: bool = False,
        model: str | None = None,
        session_id: str | None = None,
        extra_tokens: int = 0,
    ) -> CompressionResult:
        """Compress an active context (or a plain list of messages) to fit ``window``.

        ``extra_tokens`` is what every request adds to the system prompt (context
        additions, tool schemas): it counts against the budget like the prompt.

        Runs the summarizer if the strategy needs one (this may take seconds:
        call it in the background). ``force`` is ``/compress``: it summarizes
        even while automatic summarizing is paused, and ``focus`` tells the
        summarizer what matters most. Never raises for a summarizer failure:
        the result falls back to truncate and says why.
        """
        context = _own_copy(messages, system_prompt)
        requested: Strategy = strategy or self.settings.strategy
        budget = self.context_budget(context, window=window, model=model, extra_tokens=extra_tokens)
        original = self._total(context)
        self._snapshot_before(context, session_id, original)
        attempt = self._try_summary(
            context, budget, requested, focus, force, window, model, session_id
        )
        used: Strategy = requested if attempt.compressed is not None else "truncate"
        notes: list[str] = []
        compressed = attempt.compressed
        if compressed is None:
            compressed = self.truncation.truncated(context, budget, notes)
        compressed = self.truncation.fitted(compressed, budget.room, notes)
        compressed, result_tokens = self._settled(
            context, compressed, budget, original, attempt.failures
        )
        _log_result(session_id, used, original, result_tokens, attempt.fallback)
        return CompressionResult(
            context=compressed,
            original_tokens=original,
            compressed_tokens=result_tokens,
            strategy=used,
            requested_strategy=requested,
            fallback_reason=attempt.fallback,
            notes=notes,
            based_on_len=len(context.messages),
            base_fingerprint=context.fingerprint(),
            summary_tokens=attempt.summary_tokens,
        )

    def _settled(
        self,
        context: ActiveContext,
        compressed: ActiveContext,
        budget: Budget,
        original: int,
        failures: int,
    ) -> tuple[ActiveContext, int]:
        """The compressed context (the original if it is no smaller) with its
        compression state set, and its tokens: a stall holds the next compression
        off until the context has grown (``compress_after``)."""
        result_tokens = self._total(compressed)
        if result_tokens >= original:
            compressed = context.model_copy(update={"messages": list(context.messages)})
            result_tokens = original
        stalled = original - result_tokens < original * MIN_FREED_FRACTION
        margin = max(1, int(budget.room * STALL_MARGIN_FRACTION))
        compressed.summary_failures = failures
        compressed.compress_after = (
            result_tokens - budget.system_prompt_tokens + margin if stalled else None
        )
        return compressed, result_tokens

    def _try_summary(
        self,
        context: ActiveContext,
        budget: Budget,
        strategy: Strategy,
        focus: str | None,
        force: bool,
        window: int,
        model: str | None,
        session_id: str | None,
    ) -> _Attempt:
        """Ask for a summary (not for ``truncate``, nor when none can be had): what
        came of it, and the failures in a row it leaves (a refused summary adds one)."""
        failures = context.summary_failures
        if strategy == "truncate":
            return _Attempt(failures=failures)
        if self.summarize_fn is None:
            return _Attempt(failures=failures, fallback="no summarizer is available")
        if self.is_paused(context) and not force:
            return _Attempt(
                failures=failures,
                fallback=f"summarizing is paused after {failures} failed summaries; "
                "run /compress to try again",
            )
        try:
            compressed, summary_tokens = self.summarizing.summarized(
                context,
                budget,
                strategy,
                focus,
                window=window,
                model=model,
                summarize_fn=self.summarize_fn,
            )
        except SummaryFailed as failure:
            self._log_failure(session_id, str(failure), failures + 1)
            return _Attempt(failures=failures + 1, fallback=str(failure))
        if compressed is None:
            return _Attempt(
                failures=failures,
                fallback="too little older content to summarize, or no room for a summary",
            )
        return _Attempt(failures=0, compressed=compressed, summary_tokens=summary_tokens)

    def truncate(
        self, messages: ActiveContext | Sequence[SessionMessage], *, window: int
    ) -> CompressionResult:
        """Compress with the truncate strategy."""
        return self.compress(messages, window=window, strategy="truncate")

    def summarize(
        self,
        messages: ActiveContext | Sequence[SessionMessage],
        *,
        window: int,
        focus: str | None = None,
        force: bool = False,
    ) -> CompressionResult:
        """Compress with the summarize strategy (truncate if the summary fails)."""
        return self.compress(
            messages, window=window, strategy="summarize", focus=focus, force=force
        )

    def hybrid(
        self,
        messages: ActiveContext | Sequence[SessionMessage],
        *,
        window: int,
        focus: str | None = None,
        force: bool = False,
    ) -> CompressionResult:
        """Compress with the hybrid strategy (truncate if the summary fails)."""
        return self.compress(messages, window=window, strategy="hybrid", focus=focus, force=force)

    def overflows(
        self,
        context: ActiveContext,
        *,
        window: int,
        extra_tokens: int = 0,
        model: str | None = None,
    ) -> bool:
        """Whether ``context`` would not fit the window as it is (cheap: cached counts)."""
        budget = self.context_budget(context, window=window, model=model, extra_tokens=extra_tokens)
        return self._total(context, with_system=False) > budget.room

    def emergency_truncate(
        self,
        context: ActiveContext,
        *,
        window: int,
        extra_tokens: int = 0,
        model: str | None = None,
        notes: list[str] | None = None,
    ) -> ActiveContext | None:
        """The context cut at once to fit the window, or ``None`` if it already fits.

        For a turn that cannot wait for a summary: synchronous, no model call,
        cached counts. Old tool results are shortened first, then the oldest
        other content goes; user messages and the newest messages go last.
        Tip: keep the uncut context as the base of a pending compression so its
        result still applies (:meth:`CompressionResult.apply` refuses a context
        that was cut meanwhile). ``notes``, when given, gets what was left out or
        cut, for the user (nothing is left out silently).
        """
        budget = self.context_budget(context, window=window, model=model, extra_tokens=extra_tokens)
        if self._total(context, with_system=False) <= budget.room:
            return None
        said: list[str] = []
        cut = self.truncation.truncated(context, budget, said)
        cut = self.truncation.fitted(cut, budget.room, said)
        logger.warning(
            "context over the window before a summary was ready: cut at once (%s)",
            "; ".join(said) or "oldest messages left out",
        )
        if notes is not None:
            notes.extend(said or ["left out the oldest messages"])
        return cut

    def request_size(self, context: ActiveContext, *, extra_tokens: int = 0) -> int:
        """The estimated tokens of a request of ``context``: its system prompt with
        ``extra_tokens`` (tools, context additions), checkpoints and messages."""
        return self._system_tokens(context.system_prompt, extra_tokens) + context.message_tokens(
            self.counter
        )

    # -- internals ---------------------------------------------------------------

    def _total(self, context: ActiveContext, *, with_system: bool = True) -> int:
        system = self._system_tokens(context.system_prompt) if with_system else 0
        return system + context.message_tokens(self.counter)

    def _snapshot_before(self, context: ActiveContext, session_id: str | None, tokens: int) -> None:
        if self.snapshots is None or not session_id:
            return
        settings = self.snapshots.settings
        if not (settings.enabled and settings.auto_create):
            return
        try:
            self.snapshots.create_snapshot(
                session_id,
                context,
                token_count=tokens,
                summary=f"before compression ({tokens} tokens, {len(context.messages)} messages)",
                reason="auto",
            )
        except Exception as error:  # a snapshot must never stop a compression
            logger.warning(
                "snapshot before compression of %s failed: %s", session_id, type(error).__name__
            )

    def _log_failure(self, session_id: str | None, reason: str, failures: int) -> None:
        logger.warning(
            "compression%s: summary refused, falling back to truncate: %s (%d in a row)",
            f" of {session_id}" if session_id else "",
            reason,
            failures,
        )
        if failures == self.settings.max_failures:
            logger.warning(
                "compression%s: automatic summarizing paused after %d failures; "
                "/compress tries again",
                f" of {session_id}" if session_id else "",
                failures,
            )


@dataclass
class _Attempt:
    """What came of trying to summarize: the new context (None: truncate instead),
    the summary's tokens, why it fell back, and the failures in a row after it."""

    failures: int
    compressed: ActiveContext | None = None
    summary_tokens: int | None = None
    fallback: str | None = None


def _own_copy(
    messages: ActiveContext | Sequence[SessionMessage], system_prompt: str | None
) -> ActiveContext:
    """A context with lists of its own (messages are never changed in place, only replaced)."""
    if isinstance(messages, ActiveContext):
        lists = {"messages": list(messages.messages), "checkpoints": list(messages.checkpoints)}
        context = messages.model_copy(update=lists)
    else:
        context = ActiveContext(messages=list(messages))
    if system_prompt is not None:
        context.system_prompt = system_prompt
    return context


def _log_result(
    session_id: str | None, used: Strategy, before: int, after: int, fallback: str | None
) -> None:
    logger.info(
        "compression%s: %s, %d -> %d tokens%s",
        f" of {session_id}" if session_id else "",
        used,
        before,
        after,
        f" (fallback: {fallback})" if fallback else "",
    )
