"""Cutting a context down without a model: shorten, drop the oldest, rebuild what it covers.

:meth:`Truncation.truncated` is the ``truncate`` strategy (old tool results
shortened, then the oldest non-user messages before the recent ones dropped
until the target is met); :meth:`Truncation.fitted` makes any context fit a
limit whatever it costs, and says what it cost in ``notes``. Both keep tool
results with their calls and work out what of the session the new context
covers (:meth:`Truncation.rebuild`).

Example::

    cut = Truncation(counter).truncated(context, budget, notes)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ollm_cli.pipeline.compression._active_context import ActiveContext
from ollm_cli.pipeline.compression._budget import Budget
from ollm_cli.pipeline.compression._summary import TOOL_RESULT_KEEP_TOKENS
from ollm_cli.pipeline.compression._tokens import MESSAGE_OVERHEAD, TokenCounter
from ollm_cli.pipeline.records import SessionMessage, TextPart, ToolCallPart, ToolResultPart


@dataclass
class Item:
    """A live message during a compression: where it came from and its size."""

    message: SessionMessage
    source: int | None
    tokens: int


class Truncation:
    """The cutting of contexts, with one token counter."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def items(self, context: ActiveContext) -> list[Item]:
        return [
            Item(message, index, self.counter.count_message(message))
            for index, message in enumerate(context.messages)
        ]

    def rebuild(
        self, context: ActiveContext, items: list[Item], checkpoints: list[SessionMessage]
    ) -> ActiveContext:
        """A new context from ``items``, working out what it covers of the session."""
        count = len(context.messages)
        tail = 0
        expected = count - 1
        for item in reversed(items):
            if item.source is None or item.source != expected or item.source < context.covered_head:
                break
            tail += 1
            expected -= 1
        first_verbatim = count - tail
        head = len(items) - tail
        return ActiveContext(
            system_prompt=context.system_prompt,
            checkpoints=list(checkpoints),
            messages=[item.message for item in items],
            covers_through=context.covers_through + max(0, first_verbatim - context.covered_head),
            covered_head=head,
            summary_failures=context.summary_failures,
            compress_after=context.compress_after,
            head_positions=[
                None if item.source is None else context.head_position(item.source)
                for item in items[:head]
            ],
        )

    @staticmethod
    def recent_start(items: Sequence[Item], keep_tokens: int) -> int:
        """Where the recent messages start: they cover at least the newest
        ``keep_tokens`` tokens (whole messages, the last one always), and do
        not start with a tool result cut off from its call."""
        start = len(items)
        kept = 0
        while start > 0 and (kept < keep_tokens or start == len(items)):
            start -= 1
            kept += items[start].tokens
        while 0 < start < len(items) and items[start].message.role == "tool":
            start -= 1
        return start

    def shortened(self, item: Item, keep_tokens: int) -> Item:
        parts = []
        changed = False
        for part in item.message.parts:
            if isinstance(part, ToolResultPart):
                content = self.counter.shorten_text(part.content, keep_tokens)
                if content != part.content:
                    part = part.model_copy(update={"content": content})
                    changed = True
            parts.append(part)
        if not changed:
            return item
        message = item.message.model_copy(update={"parts": parts})
        return Item(message, None, self.counter.count_message(message))

    def cut(self, message: SessionMessage, keep_tokens: int) -> SessionMessage:
        """``message`` with its text and tool results shortened to ``keep_tokens`` in all."""
        parts = []
        shares = max(1, len(message.parts))
        for part in message.parts:
            if isinstance(part, TextPart):
                text = self.counter.shorten_text(part.text, keep_tokens // shares)
                part = part.model_copy(update={"text": text})
            elif isinstance(part, ToolResultPart):
                content = self.counter.shorten_text(part.content, keep_tokens // shares)
                part = part.model_copy(update={"content": content})
            parts.append(part)
        return message.model_copy(update={"parts": parts})

    @staticmethod
    def drop_with_results(items: list[Item], index: int, stop: int) -> tuple[int, int]:
        """Remove ``items[index]`` and the tool results before ``stop`` answering
        its calls; returns how many messages and tokens were removed."""
        call_ids = {
            part.id for part in items[index].message.parts if isinstance(part, ToolCallPart)
        }
        removed = items.pop(index).tokens
        count = 1
        position = index
        stop -= 1
        while call_ids and position < stop:
            message = items[position].message
            answers = any(
                isinstance(p, ToolResultPart) and p.tool_call_id in call_ids for p in message.parts
            )
            if message.role == "tool" and answers:
                removed += items.pop(position).tokens
                count += 1
                stop -= 1
            else:
                position += 1
        return count, removed

    def truncated(self, context: ActiveContext, budget: Budget, notes: list[str]) -> ActiveContext:
        """Truncate: shorten old tool results, then drop the oldest non-user
        messages before the recent ones until the target is met."""
        items = self.items(context)
        recent_start = self.recent_start(items, budget.recent)
        checkpoint_tokens = self.counter.count_messages(context.checkpoints)
        shortened = 0
        for index in range(recent_start):
            new = self.shortened(items[index], TOOL_RESULT_KEEP_TOKENS)
            if new is not items[index]:
                items[index] = new
                shortened += 1
        if shortened:
            notes.append(f"shortened {shortened} older tool results")
        total = checkpoint_tokens + sum(item.tokens for item in items)
        dropped = 0
        index = 0
        while total > budget.target and index < recent_start:
            if items[index].message.role == "user":
                index += 1
                continue
            removed, tokens = self.drop_with_results(items, index, recent_start)
            total -= tokens
            dropped += removed
            recent_start -= removed
        if dropped:
            notes.append(f"left out the {dropped} oldest messages before the recent ones")
        return self.rebuild(context, items, context.checkpoints)

    def fitted(self, context: ActiveContext, limit: int, notes: list[str]) -> ActiveContext:
        """Make checkpoints + messages fit ``limit`` whatever it costs, in this
        order: shorten tool results, drop the oldest non-user messages, drop
        the checkpoints, drop the oldest user messages, cut the last message."""
        items = self.items(context)
        checkpoints = list(context.checkpoints)
        checkpoint_tokens = self.counter.count_messages(checkpoints)
        total = checkpoint_tokens + sum(item.tokens for item in items)
        if total <= limit:
            return context
        for index in range(len(items)):
            if total <= limit:
                break
            new = self.shortened(items[index], TOOL_RESULT_KEEP_TOKENS)
            total += new.tokens - items[index].tokens
            items[index] = new
        dropped = 0
        index = 0
        while total > limit and index < len(items) - 1:
            if items[index].message.role == "user":
                index += 1
                continue
            removed, tokens = self.drop_with_results(items, index, len(items) - 1)
            total -= tokens
            dropped += removed
        if total > limit and checkpoints:
            # user messages kept beside the summary were in the transcript it was
            # made from: they go before the summary does
            covered = 0
            index = 0
            while total > limit and index < min(context.covered_head, len(items) - 1):
                if items[index].source is not None and items[index].message.role == "user":
                    total -= items.pop(index).tokens
                    covered += 1
                else:
                    index += 1
            if covered:
                notes.append(
                    f"left out the {covered} oldest user messages kept beside the summary "
                    "(the summary covers them; the session file still has them)"
                )
        if total > limit and checkpoints:
            total -= checkpoint_tokens
            checkpoints = []
            checkpoint_tokens = 0
            notes.append("even the summary did not fit the window: it was left out")
        while total > limit and len(items) > 1:
            total -= items.pop(0).tokens
            dropped += 1
        if dropped:
            notes.append(
                f"the context did not fit the window even compressed: left out {dropped} "
                "more messages, oldest first (the session file still has them)"
            )
        if total > limit and items:
            message = self.cut(items[-1].message, max(0, limit - MESSAGE_OVERHEAD - 16))
            items[-1] = Item(message, None, self.counter.count_message(message))
            notes.append("the newest message alone was larger than the window: it was cut")
        return self.rebuild(context, items, checkpoints)
