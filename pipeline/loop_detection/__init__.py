"""The LoopDetectionService: repeated tool calls, cycles, repeated text, turn limits."""

from __future__ import annotations

from ollm_cli.pipeline.loop_detection._service import LoopDetectionService, LoopEvent

__all__ = [
    "LoopDetectionService",
    "LoopEvent",
]
