"""A message larger than the model's window: refused, or cut when the user consents.

The pipeline refuses a message its model's window cannot hold even alone
(:class:`~ollm_cli.pipeline.errors.PromptTooLargeError`, exit code 2), before
anything is recorded or sent. With ``--truncate-prompt`` the user consents to
sending it with its middle cut out: :func:`run_turn_within_window` cuts it to the
room the error names and runs the turn again, and the result's ``notices`` say so
(stderr and ``--json`` for ``-p``, a line in the chat). What is recorded is what
was sent.

Example::

    result = run_turn_within_window(loop, coordinator, sid, text, truncate=True)
    for notice in result.notices: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline.errors import PromptTooLargeError

if TYPE_CHECKING:
    from ollm_cli.cli.loop_thread import LoopThread
    from ollm_cli.pipeline.contract import ConversationContract
    from ollm_cli.pipeline.coordinator._turn_result import TurnResult

CUT_MARGIN = 24
"""Tokens kept free below the room, for the marker and tokenizer boundaries."""
MIN_ROOM = 64
"""Less room than this for the message: nothing sensible is left to send; refuse."""


def cut_to_fit(text: str, error: PromptTooLargeError) -> str:
    """``text`` with its middle left out (a marker says how much) to fit the room
    ``error`` names."""
    from ollm_cli.pipeline.compression import TokenCounter  # tiktoken: only to cut

    return TokenCounter(persist=False).shorten_text(text, error.room_estimate - CUT_MARGIN)


def run_turn_within_window(
    loop: LoopThread,
    coordinator: ConversationContract,
    session_id: str,
    text: str,
    *,
    truncate: bool,
) -> TurnResult:
    """Run the turn; a message too large for the window is refused (the error
    propagates) unless ``truncate``: then it is cut to fit and the turn runs on
    the cut message, with a notice first in ``result.notices``."""
    try:
        return loop.run(coordinator.run_turn(session_id, text))
    except PromptTooLargeError as error:
        if not truncate or error.room_estimate < MIN_ROOM:
            raise
        refused = error
    cut = cut_to_fit(text, refused)
    result = loop.run(coordinator.run_turn(session_id, cut))
    result.notices.insert(
        0,
        f"the message was about {refused.prompt_tokens} tokens, more than the "
        f"{refused.room_tokens} the model's window of {refused.window} tokens leaves for it: "
        "it was sent and recorded with its middle cut out (--truncate-prompt), "
        "marked '[... N tokens left out ...]'",
    )
    return result
