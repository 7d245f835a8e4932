"""Loop events, and the rule that turns a detection into a nudge or a stop.

With ``onDetect: nudge`` the first detection of a kind is a nudge (with a
sentence for the next request, given once); the next one stops. A poll is
always nudged before it is stopped; the turn limit always stops. Once
stopped, the stop stays in force until the next user message.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import ConfigDict

from ollm_cli.base.deferred_model import DeferredModel
from ollm_cli.config.settings import LoopDetectionSettings

logger = logging.getLogger(__name__)

LoopKind = Literal[
    "repeated-tool", "tool-cycle", "repeated-output", "stream-repetition", "turn-limit"
]
LoopAction = Literal["nudge", "stop"]

#: How much of a call or a text an event shows.
OFFENDING_CHARS = 200

NUDGES: dict[str, str] = {
    "repeated-tool": (
        "You have made the same tool call {count} times in a row and its result did not "
        "change. Do not repeat it: use the result you already have, try a different "
        "approach, or tell the user what is blocking you."
    ),
    "tool-cycle": (
        "You are repeating the same cycle of tool calls ({count} times) without progress. "
        "Stop the cycle: change your approach or explain to the user what is blocking you."
    ),
    "repeated-output": (
        "Your last {count} replies were (nearly) identical. Do not repeat yourself: "
        "either make progress with a different step or give the user your final answer."
    ),
    "stream-repetition": (
        "Your previous reply started repeating the same text over and over. "
        "Answer concisely and do not repeat phrases."
    ),
    "poll": (
        "You have checked the same thing {count} times and its result has not changed. "
        "If you are waiting for something slow, wait longer between checks; otherwise "
        "tell the user it is still in progress instead of checking again."
    ),
}


class LoopEvent(DeferredModel):
    """A detected loop: what repeated, how often, and what the coordinator must do."""

    model_config = ConfigDict(defer_build=True)  # built when first used, not at import

    kind: LoopKind
    details: str
    count: int
    action: LoopAction
    offending: str


def _truncate(text: str, limit: int = OFFENDING_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def truncate(text: str, limit: int = OFFENDING_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Verdicts:
    """The events of one request: which kinds were nudged, the nudge still to give,
    the stop in force and the latest event (shared by every detector)."""

    def __init__(self, settings: LoopDetectionSettings) -> None:
        self.settings = settings
        self.nudged: set[str] = set()
        self.pending_nudge: str | None = None
        self.stopped: LoopEvent | None = None
        self.last_event: LoopEvent | None = None

    def report(
        self, kind: LoopKind, count: int, offending: str, details: str, *, poll: bool = False
    ) -> LoopEvent:
        state = self
        action: LoopAction = "stop"
        if poll and "poll" not in state.nudged:
            # Waiting on something slow is work: always a nudge before a stop.
            action = "nudge"
            state.nudged.add("poll")
            state.pending_nudge = NUDGES["poll"].format(count=count)
        elif (
            not poll
            and kind != "turn-limit"
            and self.settings.on_detect == "nudge"
            and kind not in state.nudged
        ):
            action = "nudge"
            state.nudged.add(kind)
            state.pending_nudge = NUDGES[kind].format(count=count)
        # the redactor's patterns are compiled when a loop is first seen: a client
        # that only decodes a LoopEvent (the service's thin client) never pays for them
        from ollm_cli.pipeline.environment import redact

        event = LoopEvent(
            kind=kind,
            details=details,
            count=count,
            action=action,
            offending=truncate(redact(offending)),
        )
        if action == "stop":
            state.stopped = event
        state.last_event = event
        logger.info("loop detected: %s (%s, count %d)", kind, action, count)
        return event

    def poll_bar(self) -> int:
        """How many unchanged polls the next poll detection needs: the threshold,
        then twice it once nudged."""
        threshold = self.settings.poll_threshold
        return 2 * threshold if "poll" in self.nudged else threshold

    def take_nudge(self) -> str | None:
        """The instruction to add to the next request after a nudge (given once)."""
        instruction, self.pending_nudge = self.pending_nudge, None
        return instruction

    def take_event(self) -> LoopEvent | None:
        """The event detected since the last call (or the stop still in force)."""
        event, self.last_event = self.last_event, None
        return event or self.stopped
