"""x

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.importers._finding import default_location, detect_source, read_sessions
    from ollm_cli.pipeline.importers._sessions import ImportSource

__all__ = [
    "ImportSource",
    "default_location",
    "detect_source",
    "read_sessions",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_finding": (
            "default_location",
            "detect_source",
            "read_sessions",
        ),
        "_sessions": ("ImportSource",),
    },
)
