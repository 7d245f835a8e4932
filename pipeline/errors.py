"""Re-exports :mod:`ollm_cli.base.errors`, where the exception hierarchy lives.

The errors moved to the base package so that ``config`` needs nothing of
``pipeline``; this path stays for the modules (and branches in flight) that
import it. New code imports :mod:`ollm_cli.base.errors`.
"""

from __future__ import annotations

from ollm_cli.base.errors import (
    ActorFailedError,
    AmbiguousSessionIdError,
    CheckpointError,
    ConfigError,
    InvalidContextError,
    InvalidSessionIdError,
    LoopDetectedError,
    OllmError,
    PromptTooLargeError,
    ProviderError,
    SandboxUnavailableError,
    ServiceError,
    ServiceLostError,
    SessionCorruptError,
    SessionError,
    SessionLockedError,
    SessionNotFoundError,
    StaleContextError,
    StorageError,
    ToolError,
    UsageError,
)

__all__ = [
    "ActorFailedError",
    "AmbiguousSessionIdError",
    "CheckpointError",
    "ConfigError",
    "InvalidContextError",
    "InvalidSessionIdError",
    "LoopDetectedError",
    "OllmError",
    "PromptTooLargeError",
    "ProviderError",
    "SandboxUnavailableError",
    "ServiceError",
    "ServiceLostError",
    "SessionCorruptError",
    "SessionError",
    "SessionLockedError",
    "SessionNotFoundError",
    "StaleContextError",
    "StorageError",
    "ToolError",
    "UsageError",
]
