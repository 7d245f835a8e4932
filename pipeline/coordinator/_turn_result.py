"""What one user turn produced, as every implementation of the conversation
contract returns it: the coordinator in this process, and the thin client of the
local service, which imports nothing of the coordinator but this module.

Example::

    result = TurnResult(session_id=sid, answer="Paris.")
    raise_if_stopped(result)        # ``-p``: a loop or a limit is exit code 5
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ollm_cli.pipeline.errors import LoopDetectedError
from ollm_cli.pipeline.loop_detection import LoopEvent
from ollm_cli.pipeline.records import ToolCallPart

AskCallback = Callable[[ToolCallPart], Awaitable[bool]]
"""How a turn asks the user whether a tool call may run (True: it may)."""
StopReason = Literal["loop", "limit", "cancelled", "error"]


class TurnResult(BaseModel):
    """What one user turn produced."""

    model_config = ConfigDict(defer_build=True)  # built when first used, not at import

    session_id: str
    answer: str
    stopped: StopReason | None = None
    loop: LoopEvent | None = None
    error: str | None = None
    rounds: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_tokens: int = 0
    context_window: int = 0
    notices: list[str] = []
    """What the user must know of this turn: messages left out of or cut in a request
    to fit the window (the session file keeps them whole), a prompt cut with consent."""
    finish_reason: str | None = None
    """How the provider said the last answer ended (``"length"``: at its output limit)."""
    token_limit: int | None = None
    """The output limit the last answer hit, when OLLM set it (the embedded model)."""


def raise_if_stopped(result: TurnResult) -> None:
    """Raise :class:`LoopDetectedError` when a loop or limit stopped the turn (for ``-p``)."""
    if result.stopped in {"loop", "limit"} and result.loop is not None:
        raise LoopDetectedError(
            f"stopped: {result.loop.kind} ({result.loop.details}, seen {result.loop.count} times)",
            hint="rephrase the request, or run with --no-loop-detection if this was intended",
        )
