"""The FileDiscoveryService and git's ignore semantics."""

from __future__ import annotations

from ollm_cli.pipeline.discovery._service import (
    DiscoveryOptions,
    DiscoveryResult,
    FileDiscoveryService,
)

__all__ = [
    "DiscoveryOptions",
    "DiscoveryResult",
    "FileDiscoveryService",
]
