"""Pipeline events: what the coordinator publishes while it routes a turn.

Subscribers (the CLI's renderer, lifecycle hooks, the load harness) receive
each event as a pydantic model; ``kind`` names it with the hook event names of
spec 004 (``session:start``, ``session:message``, ...). Events are published in
the driver process, so a slow subscriber never holds up an actor.

Example::

    bus = EventBus()
    bus.subscribe(lambda event: print(event.kind))
    bus.publish(SessionStarted(session_id=sid, model="llama3.2", provider="ollama"))
"""

# No `from __future__ import annotations` here: pydantic evaluates a string annotation
# when it creates the class, a quarter of the time it takes to create these models,
# which every command does (a warm `ollm run -p` among them).
import logging
from collections.abc import Callable, Collection
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from ollm_cli.base.deferred_model import DeferredModel
from ollm_cli.config.settings import HookEvent
from ollm_cli.pipeline.records import now_iso

logger = logging.getLogger(__name__)

EventKind = Literal[HookEvent, "model:text", "model:thinking", "pipeline:status", "context:notice"]


class PipelineEvent(DeferredModel):
    """Base of every event: which session, when, and what kind."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built when first sent

    kind: EventKind
    session_id: str
    timestamp: str = Field(default_factory=now_iso)

    def to_hook_payload(self) -> dict[str, Any]:
        """The event as the JSON object a hook command reads on stdin."""
        return self.model_dump(mode="json")


class SessionStarted(PipelineEvent):
    kind: Literal["session:start"] = "session:start"
    model: str
    provider: str
    resumed: bool = False


class SessionEnded(PipelineEvent):
    kind: Literal["session:end"] = "session:end"
    turns: int = 0


class MessageRecorded(PipelineEvent):
    kind: Literal["session:message"] = "session:message"
    role: str
    text: str


class ToolCallEvent(PipelineEvent):
    kind: Literal["tool:call"] = "tool:call"
    name: str
    args: dict[str, Any]
    success: bool | None = None
    duration_ms: float | None = None
    display: str | None = None
    error: str | None = None
    denied: Literal["ask", "deny"] | None = None
    """The call was not run: nobody allowed it (``ask``: declined, or nobody to ask)
    or the config denies the tool (``deny``)."""


class LoopDetectedEvent(PipelineEvent):
    kind: Literal["loop:detected"] = "loop:detected"
    pattern: str
    details: str
    count: int
    action: Literal["nudge", "stop"]


class CompressionStarted(PipelineEvent):
    kind: Literal["compression:started"] = "compression:started"
    strategy: str
    tokens: int


class CompressionFinished(PipelineEvent):
    kind: Literal["compression:finished"] = "compression:finished"
    strategy: str
    tokens_before: int
    tokens_after: int
    fallback: str | None = None
    error: str | None = None


class TextDelta(PipelineEvent):
    """A piece of the model's streamed answer (for live rendering)."""

    kind: Literal["model:text"] = "model:text"
    text: str


class ThinkingDelta(PipelineEvent):
    """A piece of a reasoning model's streamed reasoning (shown folded, apart from the answer)."""

    kind: Literal["model:thinking"] = "model:thinking"
    text: str


class ContextNotice(PipelineEvent):
    """Something the user should know about the context files: one was refused (a
    link, a FIFO, too large...) or changed since a conversation last read it; or about
    the hooks that add context: one could not run (no sandbox here)."""

    kind: Literal["context:notice"] = "context:notice"
    message: str


class StatusEvent(PipelineEvent):
    """What the pipeline is doing now, and how full the window is."""

    kind: Literal["pipeline:status"] = "pipeline:status"
    activity: Literal["model", "tool", "compressing", "idle"]
    tokens_used: int = 0
    context_window: int = 0
    detail: str = ""


AnyEvent = Annotated[
    SessionStarted
    | SessionEnded
    | MessageRecorded
    | ToolCallEvent
    | LoopDetectedEvent
    | CompressionStarted
    | CompressionFinished
    | TextDelta
    | ThinkingDelta
    | ContextNotice
    | StatusEvent,
    Field(discriminator="kind"),
]

Subscriber = Callable[[PipelineEvent], None]


class EventBus:
    """Publishes events to subscribers; a failing subscriber is logged, never fatal."""

    def __init__(self) -> None:
        self._subscribers: list[tuple[Subscriber, frozenset[str] | None]] = []

    def subscribe(self, callback: Subscriber, kinds: Collection[str] | None = None) -> None:
        """Call ``callback`` for every event (or only those whose kind is in ``kinds``)."""
        self._subscribers.append((callback, frozenset(kinds) if kinds else None))

    def unsubscribe(self, callback: Subscriber) -> None:
        """Stop calling ``callback``."""
        self._subscribers = [(cb, k) for cb, k in self._subscribers if cb is not callback]

    def wanted(self) -> frozenset[str] | None:
        """The kinds some subscriber listens to (``None``: one listens to every kind);
        a bus fed from elsewhere (the local service) asks only for these."""
        kinds: set[str] = set()
        for _, listened in self._subscribers:
            if listened is None:
                return None
            kinds |= listened
        return frozenset(kinds)

    def publish(self, event: PipelineEvent) -> None:
        """Deliver ``event`` to each interested subscriber, in subscription order."""
        for callback, kinds in list(self._subscribers):
            if kinds is not None and event.kind not in kinds:
                continue
            try:
                callback(event)
            except Exception:
                logger.exception("event subscriber failed on %s", event.kind)
