"""The coordinator: how one conversation's turns are routed through the service
actors, and the state it keeps of each conversation.

- ``_coordinator``: :class:`Coordinator`, the session lifecycle and the turn;
- ``_turn_result``: :class:`TurnResult`, what a turn returns (all a thin client needs);
- ``_conversation``: each live conversation's state;
- ``_provider_stream``: only new messages travel to the provider actor;
- ``_compaction``: compression scheduled in the background, and the window checks;
- ``_titles``: a session's title from its first exchange.

Example::

    coordinator = Coordinator(runtime, settings, workspace=Path.cwd())
    sid = await coordinator.start_session()
    result = await coordinator.run_turn(sid, "Hello")
    await coordinator.end_session(sid)

The names below are imported when first used, so a thin client that needs only
:class:`TurnResult` loads neither the actors nor the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.coordinator._conversation import Conversation
    from ollm_cli.pipeline.coordinator._coordinator import Coordinator
    from ollm_cli.pipeline.coordinator._turn_result import (
        AskCallback,
        StopReason,
        TurnResult,
        raise_if_stopped,
    )

__all__ = [
    "AskCallback",
    "Conversation",
    "Coordinator",
    "StopReason",
    "TurnResult",
    "raise_if_stopped",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_coordinator": ("Coordinator",),
        "_conversation": ("Conversation",),
        "_turn_result": (
            "AskCallback",
            "StopReason",
            "TurnResult",
            "raise_if_stopped",
        ),
    },
)
