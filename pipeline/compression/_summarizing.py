"""The ``summarize`` and ``hybrid`` strategies: older messages replaced by one summary.

What goes into the summary is planned first (:class:`SummaryPlan`: which
messages it replaces, which stay verbatim, how long it may be); the model is
asked, its answer checked, and the summary becomes the context's one checkpoint.
A summary that is empty, repeats itself, is not smaller than what it replaces
or does not fit raises :class:`~._summary.SummaryFailed` (the service falls
back to truncate).

Example::

    summarizing = Summarizing(settings, counter, Truncation(counter))
    context, tokens = summarizing.summarized(
        context, budget, "hybrid", None, window=8192, model=None, summarize_fn=ask_model
    )
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ollm_cli.config.settings import CompressionSettings
from ollm_cli.pipeline.compression._active_context import (
    ActiveContext,
    checkpoint_message,
    checkpoint_text,
)
from ollm_cli.pipeline.compression._budget import Budget, Strategy
from ollm_cli.pipeline.compression._summary import (
    SummarizeFn,
    SummaryFailed,
    build_summary_prompt,
    clean_summary,
    summary_problem,
    transcript,
)
from ollm_cli.pipeline.compression._tokens import MESSAGE_OVERHEAD, TokenCounter
from ollm_cli.pipeline.compression._truncation import Item, Truncation
from ollm_cli.pipeline.records import SessionMessage

CHECKPOINT_OVERHEAD = MESSAGE_OVERHEAD + 12
"""What a checkpoint costs besides its summary (framing and the marker line)."""

MIN_SUMMARIZABLE_TOKENS = 64
"""Less old content than this is truncated, not summarized."""

SUMMARY_PROMPT_OVERHEAD = 400
"""Tokens of the summary prompt's instructions, kept free in the summarizer's window."""

MIN_TRANSCRIPT_TOKENS = 128

MIN_SUMMARY_TOKENS = 16
"""A summary with less room than this is not attempted (truncate instead)."""


@dataclass
class SummaryPlan:
    """What one summary replaces and what stays: ``old`` goes into the transcript,
    ``kept`` stays verbatim, the summary may hold ``max_tokens`` and must stay
    under ``replaced_tokens`` and within ``fits``."""

    old: list[Item]
    kept: list[Item]
    replaced_tokens: int
    fits: int
    max_tokens: int


class Summarizing:
    """The summarizing strategies, for one compression configuration."""

    def __init__(
        self, settings: CompressionSettings, counter: TokenCounter, truncation: Truncation
    ) -> None:
        self.settings = settings
        self.counter = counter
        self.truncation = truncation

    def summarized(
        self,
        context: ActiveContext,
        budget: Budget,
        strategy: Strategy,
        focus: str | None,
        *,
        window: int,
        model: str | None,
        summarize_fn: SummarizeFn,
    ) -> tuple[ActiveContext | None, int]:
        """Summarize (or hybrid): the new context and the summary's tokens, or
        ``None`` when there is too little to summarize. Raises
        :class:`SummaryFailed` when the summary cannot be used."""
        plan = self.plan(context, budget, strategy)
        if plan is None:
            return None, 0
        previous = "\n\n".join(checkpoint_text(c) for c in context.checkpoints) or None
        prompt_room = int(window / self.counter.ratio(model)) - plan.max_tokens
        prompt_room -= SUMMARY_PROMPT_OVERHEAD
        prompt_room -= self.counter.count_text(previous or "") + self.counter.count_text(
            focus or ""
        )
        prompt_room = max(prompt_room, MIN_TRANSCRIPT_TOKENS)
        prompt = build_summary_prompt(
            transcript(self.counter, [item.message for item in plan.old], prompt_room),
            previous=previous,
            focus=focus,
            max_tokens=plan.max_tokens,
        )
        text = self._ask(summarize_fn, prompt, plan.max_tokens)
        checkpoint, checkpoint_tokens = self._checkpoint(text, plan)
        return self.truncation.rebuild(context, plan.kept, [checkpoint]), checkpoint_tokens

    def plan(
        self, context: ActiveContext, budget: Budget, strategy: Strategy
    ) -> SummaryPlan | None:
        """Which messages the summary replaces and how long it may be (None: too
        little to summarize, or no room for a summary)."""
        items = self.truncation.items(context)
        summary_cap = max(16, min(self.settings.summary_max_tokens, budget.target // 3))
        start = self.truncation.recent_start(items, budget.recent)
        if strategy == "summarize":
            start = summarize_start(items, start, budget.target - summary_cap)
        old = items[:start]
        recent = items[start:]
        replaced = [item for item in old if item.message.role != "user"]
        new_tokens = sum(item.tokens for item in replaced)
        if new_tokens < MIN_SUMMARIZABLE_TOKENS:
            return None
        replaced_tokens = new_tokens + self.counter.count_messages(context.checkpoints)
        old_users = [item for item in old if item.message.role == "user"]
        fits = budget.room - sum(item.tokens for item in old_users + recent)
        while old_users and fits < summary_cap:
            # a window too small for the user messages and a summary: the oldest
            # user messages are in the transcript, so the summary stands for them
            fits += old_users.pop(0).tokens
        max_tokens = min(summary_cap, replaced_tokens, fits) - CHECKPOINT_OVERHEAD
        if max_tokens < MIN_SUMMARY_TOKENS:
            return None
        return SummaryPlan(old, old_users + recent, replaced_tokens, fits, max_tokens)

    @staticmethod
    def _ask(summarize_fn: SummarizeFn, prompt: str, max_tokens: int) -> str:
        """The summarizer's answer, cleaned and checked (:class:`SummaryFailed` if unusable)."""
        try:
            text = summarize_fn(prompt, max_tokens)
        except Exception as error:
            raise SummaryFailed(f"the summarizer failed ({type(error).__name__})") from error
        if not isinstance(text, str):
            raise SummaryFailed("the summarizer returned no text")
        text = clean_summary(text)
        problem = summary_problem(text)
        if problem:
            raise SummaryFailed(problem)
        return text

    def _checkpoint(self, text: str, plan: SummaryPlan) -> tuple[SessionMessage, int]:
        """The summary as the context's checkpoint, and its tokens, if it earns its place."""
        checkpoint = checkpoint_message(text)
        checkpoint_tokens = self.counter.count_message(checkpoint)
        if checkpoint_tokens >= plan.replaced_tokens:
            raise SummaryFailed(
                f"the summary ({checkpoint_tokens} tokens) is not smaller than what it "
                f"replaces ({plan.replaced_tokens} tokens)"
            )
        if checkpoint_tokens > plan.fits:
            raise SummaryFailed(
                f"the summary ({checkpoint_tokens} tokens) is longer than asked for and does "
                f"not fit the {plan.fits} tokens left in the window"
            )
        if self.counter.count_text(text) > self.settings.summary_max_tokens:
            # a model that wrote past what it was asked: the one rolling summary
            # never grows beyond summaryMaxTokens (its middle goes)
            checkpoint = checkpoint_message(
                self.counter.shorten_text(text, self.settings.summary_max_tokens)
            )
            checkpoint_tokens = self.counter.count_message(checkpoint)
        return checkpoint, checkpoint_tokens


def summarize_start(items: Sequence[Item], start: int, room: int) -> int:
    """For ``summarize``: move the recent start back (summarize less) while
    the kept messages, the older user messages and the summary fit ``room``."""
    user_before = [0] * (len(items) + 1)
    for index, item in enumerate(items):
        user_before[index + 1] = user_before[index] + (
            item.tokens if item.message.role == "user" else 0
        )
    kept = sum(item.tokens for item in items[start:])
    while start > 0 and kept + items[start - 1].tokens + user_before[start - 1] <= room:
        start -= 1
        kept += items[start].tokens
    while start < len(items) and items[start].message.role == "tool":
        start += 1
    return start
