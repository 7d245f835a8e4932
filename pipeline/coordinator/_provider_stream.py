"""The model's answer from the provider actor, sending only the new messages.

The provider actor keeps each conversation's messages from its previous request
(keyed by :attr:`Conversation.key`, numbered by a version), so a request carries
only the messages after those it began with (:class:`ChatOpening`'s ``base``).
When the actor no longer holds them (it was restarted: ``StaleContextError``) the
whole request goes again; after any failure the next request sends everything.
The answer comes in batches the actor hands out on each poll; a stream left
before its end is cancelled in the background.

Example::

    stream = ProviderStream(runtime)
    async for chunk in stream.answer(conversation, request, gate=None):
        print(chunk.text, end="")
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable

from ollm_cli.actors.provider import ProviderShell
from ollm_cli.pipeline.coordinator._conversation import Conversation
from ollm_cli.pipeline.errors import OllmError, StaleContextError
from ollm_cli.pipeline.providers import ChatBatch, ChatOpening, ChatRequest, StreamChunk
from ollm_cli.pipeline.records import SessionMessage
from ollm_cli.pipeline.runtime import Runtime

logger = logging.getLogger(__name__)


class ProviderStream:
    """Streams answers from one runtime's provider actor (see the module)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def answer(
        self, conversation: Conversation, request: ChatRequest, gate: Awaitable[None] | None
    ) -> AsyncGenerator[StreamChunk, None]:
        """The model's answer, batch by batch as the provider actor hands it out.

        Only the messages after those the conversation's previous request began
        with travel (the actor keeps them); when the actor no longer holds them
        (it was restarted) the whole request goes again. After any failure the
        next request sends everything. A stream left before its end is cancelled.
        No chunk is yielded before ``gate`` (the user's message is durable).
        """
        provider = self.runtime.provider
        messages = request.messages
        kept = conversation.sent
        conversation.sent = None
        version = (kept[0] if kept else 0) + 1
        base = _common_prefix(kept[1], messages) if kept else 0
        stream_id = uuid.uuid4().hex
        opening = ChatOpening(
            request=request.model_copy(update={"messages": messages[base:]}) if base else request,
            conversation=conversation.key,
            version=version,
            base=base,
            base_version=kept[0] if kept else 0,
            stream_id=stream_id,
        )
        more = True
        try:
            try:
                batch: ChatBatch = await provider.call(ProviderShell.chat_begin, opening)
            except StaleContextError:
                whole = opening.model_copy(update={"request": request, "base": 0})
                batch = await provider.call(ProviderShell.chat_begin, whole)
            conversation.sent = (version, messages)
            if gate is not None:
                await gate  # the user's message is durable before a word of the answer
            while True:
                more = batch.more
                if batch.chunk is not None:
                    yield batch.chunk
                if not more:
                    return
                batch = await provider.call(ProviderShell.chat_next, stream_id)
        finally:
            if more:
                conversation.sent = None
                conversation.run_in_background(self._cancel(stream_id))

    async def _cancel(self, stream_id: str) -> None:
        try:
            await self.runtime.provider.call(ProviderShell.chat_cancel, stream_id)
        except OllmError as error:  # the actor died: the stream died with it
            logger.info("cancelling answer %s: %s", stream_id, error)


def _common_prefix(before: list[SessionMessage], now: list[SessionMessage]) -> int:
    """How many messages ``now`` begins with that are ``before``'s, the same objects."""
    count = 0
    for old, new in zip(before, now, strict=False):
        if old is not new:
            break
        count += 1
    return count
