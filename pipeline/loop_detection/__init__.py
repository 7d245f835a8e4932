"""The LoopDetectionService: repeated tool calls, cycles, repeated text, turn limits.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.loop_detection._event import LoopEvent
    from ollm_cli.pipeline.loop_detection._service import LoopDetectionService

__all__ = [
    "LoopDetectionService",
    "LoopEvent",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_event": ("LoopEvent",),
        "_service": ("LoopDetectionService",),
    },
)
