"""The ChatCompressionService, token counting and the SnapshotManager.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.compression._active_context import ActiveContext
    from ollm_cli.pipeline.compression._result import CompressionResult
    from ollm_cli.pipeline.compression._service import ChatCompressionService
    from ollm_cli.pipeline.compression._snapshot_info import SnapshotInfo
    from ollm_cli.pipeline.compression._snapshots import SnapshotManager
    from ollm_cli.pipeline.compression._summarizer import ModelSummarizer
    from ollm_cli.pipeline.compression._tokens import TokenCounter, encoding, load_encoding_soon

__all__ = [
    "ActiveContext",
    "ChatCompressionService",
    "CompressionResult",
    "ModelSummarizer",
    "SnapshotInfo",
    "SnapshotManager",
    "TokenCounter",
    "encoding",
    "load_encoding_soon",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_active_context": ("ActiveContext",),
        "_result": ("CompressionResult",),
        "_service": ("ChatCompressionService",),
        "_snapshot_info": ("SnapshotInfo",),
        "_snapshots": ("SnapshotManager",),
        "_summarizer": ("ModelSummarizer",),
        "_tokens": (
            "TokenCounter",
            "encoding",
            "load_encoding_soon",
        ),
    },
)
