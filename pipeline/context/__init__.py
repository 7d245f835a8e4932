"""The ContextManager: additions to the system prompt by priority.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.context._entry import ContextEntry, ContextSource
    from ollm_cli.pipeline.context._entry_store import ContextEntryStore
    from ollm_cli.pipeline.context._manager import ContextAdditions, ContextManager
    from ollm_cli.pipeline.context._sessions import SessionContexts

__all__ = [
    "ContextAdditions",
    "ContextEntry",
    "ContextEntryStore",
    "ContextManager",
    "ContextSource",
    "SessionContexts",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_entry": ("ContextEntry", "ContextSource"),
        "_entry_store": ("ContextEntryStore",),
        "_manager": ("ContextAdditions", "ContextManager"),
        "_sessions": ("SessionContexts",),
    },
)
