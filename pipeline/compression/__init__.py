"""The ChatCompressionService, token counting and the SnapshotManager."""

from __future__ import annotations

from ollm_cli.pipeline.compression._service import (
    ActiveContext,
    ChatCompressionService,
    CompressionResult,
)
from ollm_cli.pipeline.compression._snapshots import SnapshotInfo, SnapshotManager
from ollm_cli.pipeline.compression._tokens import TokenCounter, encoding

__all__ = [
    "ActiveContext",
    "ChatCompressionService",
    "CompressionResult",
    "SnapshotInfo",
    "SnapshotManager",
    "TokenCounter",
    "encoding",
]
