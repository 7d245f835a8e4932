"""Sessions of Claude Code, Codex, Gemini CLI and llm, read as OLLM sessions.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.importers._finding import (
        NAMES,
        FileOutcome,
        default_location,
        detect_source,
        read_file,
        read_files,
        read_sessions,
    )
    from ollm_cli.pipeline.importers._limits import Admitted, ImportLimits, size_text
    from ollm_cli.pipeline.importers._reading import ImportFormatError
    from ollm_cli.pipeline.importers._sessions import ImportSource

__all__ = [
    "NAMES",
    "Admitted",
    "FileOutcome",
    "ImportFormatError",
    "ImportLimits",
    "ImportSource",
    "default_location",
    "detect_source",
    "read_file",
    "read_files",
    "read_sessions",
    "size_text",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_finding": (
            "NAMES",
            "FileOutcome",
            "default_location",
            "detect_source",
            "read_file",
            "read_files",
            "read_sessions",
        ),
        "_limits": ("Admitted", "ImportLimits", "size_text"),
        "_reading": ("ImportFormatError",),
        "_sessions": ("ImportSource",),
    },
)
