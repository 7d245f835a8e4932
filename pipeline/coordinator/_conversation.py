"""The state of a live conversation, shared by the coordinator's parts.

:class:`Conversation` is the coordinator's own state of one conversation (the
active context sent to the model, token accounting, the work it runs in the
background); what a turn returns is :class:`~ollm_cli.pipeline.coordinator.TurnResult`
(``_turn_result``). Everything durable lives in the recording actor. Both are
re-exported by :mod:`ollm_cli.pipeline.coordinator`, where callers import them from.

Example::

    conversation.run_in_background(save(sid))
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from ollm_cli.pipeline.compression import ActiveContext, CompressionResult
from ollm_cli.pipeline.providers import ModelInfo, StreamChunk
from ollm_cli.pipeline.records import SessionMessage
from ollm_cli.pipeline.tools import ToolGrant


@dataclass
class Conversation:
    """The coordinator's state of one live conversation."""

    session_id: str
    model: str
    provider: str
    info: ModelInfo
    context: ActiveContext
    turns: int = 0
    title_pending: bool = True
    nudge: str | None = None
    compression: asyncio.Task[CompressionResult | None] | None = None
    title: asyncio.Task[None] | None = None
    extra_tokens: int = 0
    usage: tuple[int, int] = (0, 0)
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    sent: tuple[int, list[SessionMessage]] | None = None
    """The version and messages of the last request the provider actor holds."""
    final_chunk: StreamChunk | None = None
    """The provider's last chunk of the answer being streamed (how it ended)."""
    turn_end_recorded: bool = False
    """The answer that ended the turn carried the turn end to recording."""
    loop_begun: bool = False
    """The loop detector began the next request when this one's answer was checked."""
    compression_tokens: int = 0
    """The tokens of the context the running compression works on."""
    sent_tokens: int = 0
    """The size of the last request sent (system prompt, tools, context, messages),
    in the model's tokens as estimated: what the status line counts."""
    notices: list[str] = field(default_factory=list)
    """What was left out of or cut in the context since the last turn's result (an
    emergency cut, a compression applied): said with the next result, never silent."""
    await_compression: bool = False
    """Resumed: the first request waits for a compression rather than being cut."""
    above_snapshot_threshold: bool = False
    """Usage was at ``snapshots.autoThreshold`` or more at the last turn end."""
    grant: ToolGrant | None = None
    """The tools this conversation's command allows without asking (``--allow-tools``,
    ``--approve auto``)."""
    created: bool = False
    """The session was created for this conversation (not resumed)."""
    kept: bool = False
    """A turn ended (or was cancelled, or failed other than at the provider), or the
    model's words were recorded: the session stays."""
    provider_failed: bool = False
    """A turn failed at the provider (an unknown model, a server down or refusing)."""
    discard_failed: bool = False
    """Its command leaves nothing of a new session whose every request failed
    (``ollm run``; a batch keeps it, to run the conversation again in it)."""

    @property
    def discardable(self) -> bool:
        """Created for this conversation, every request of it failed at the provider,
        and its command asked so: when it ends, the session (the user's messages
        only) is not kept."""
        return self.discard_failed and self.created and self.provider_failed and not self.kept

    def run_in_background(self, work: Awaitable[Any]) -> None:
        """Run ``work`` beside the turns; the session waits for it when it ends."""
        task = asyncio.ensure_future(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
