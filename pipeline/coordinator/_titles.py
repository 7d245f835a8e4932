"""A session's title, asked of the model after its first answered turn.

The session keeps its first-line title when the model fails or says nothing
usable; a title the model gives is recorded with ``titleSource: "model"``.

Example::

    conversation.title = asyncio.ensure_future(generate_title(runtime, conversation))
"""

from __future__ import annotations

import logging

from ollm_cli.actors.provider import ProviderShell
from ollm_cli.actors.recording import RecordingShell
from ollm_cli.pipeline.coordinator._conversation import Conversation
from ollm_cli.pipeline.providers import ChatRequest
from ollm_cli.pipeline.records import SessionMessage
from ollm_cli.pipeline.runtime import Runtime

logger = logging.getLogger(__name__)

TITLE_PROMPT = (
    "Write a title of at most six words for the conversation below. "
    "Reply with the title only, no quotes.\n\n"
)


async def generate_title(runtime: Runtime, conversation: Conversation) -> None:
    """Ask the model for a title of the conversation's first messages and record it."""
    transcript = "\n".join(
        f"{m.role}: {m.text[:500]}" for m in conversation.context.messages[:4] if m.text
    )
    request = ChatRequest(
        model=conversation.model,
        messages=[SessionMessage.user(TITLE_PROMPT + transcript)],
        max_tokens=24,
        temperature=0.2,
        num_ctx=conversation.info.context_window,
    )
    try:
        title = await runtime.provider.call(ProviderShell.complete, request)
    except Exception as error:  # the first-line title stays
        logger.info("title generation failed: %s", type(error).__name__)
        return
    cleaned = " ".join(str(title).strip().strip("\"'").split())[:80]
    if cleaned:
        await runtime.recording.call(
            RecordingShell.update_metadata,
            conversation.session_id,
            title=cleaned,
            title_source="model",
        )
