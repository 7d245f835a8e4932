"""The ContextManager: additions to the system prompt by priority."""

from __future__ import annotations

from ollm_cli.pipeline.context._manager import (
    ContextAdditions,
    ContextEntry,
    ContextManager,
    ContextSource,
)

__all__ = [
    "ContextAdditions",
    "ContextEntry",
    "ContextManager",
    "ContextSource",
]
