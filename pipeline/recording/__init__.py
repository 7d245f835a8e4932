"""The ChatRecordingService: durable sessions (journal, files, index), export, titles.

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.recording._checkpoints import RESTORE_TRIGGER, ResumePoint
    from ollm_cli.pipeline.recording._export import (
        INTERRUPTED_NOTE,
        CompressionMark,
        ExportFormat,
        NoteBlock,
        TextBlock,
        ThinkingBlock,
        ToolCallView,
        TranscriptEntry,
        call_outcome,
        compression_summary,
        describe_compression,
        format_args,
        html_chunks,
        iter_transcript,
        json_chunks,
        markdown_chunks,
        render,
        session_facts,
        session_heading,
        transcript,
        with_compression_marks,
    )
    from ollm_cli.pipeline.recording._fork import (
        FORKED_FROM,
        ForkOrigin,
        ForkResult,
        check_index,
        tool_call_ids,
    )
    from ollm_cli.pipeline.recording._ids import canonical_id, checked_id, is_session_id
    from ollm_cli.pipeline.recording._recorder import SessionRecorder, redact_record
    from ollm_cli.pipeline.recording._store import ChatRecordingService
    from ollm_cli.pipeline.recording._stream import StreamedSession, gc_relaxed
    from ollm_cli.pipeline.records import (
        MARK_END,
        MARK_START,
        CloseReport,
        SearchHit,
        StoreHealth,
    )

__all__ = [
    "FORKED_FROM",
    "INTERRUPTED_NOTE",
    "MARK_END",
    "MARK_START",
    "RESTORE_TRIGGER",
    "ChatRecordingService",
    "CloseReport",
    "CompressionMark",
    "ExportFormat",
    "ForkOrigin",
    "ForkResult",
    "NoteBlock",
    "ResumePoint",
    "SearchHit",
    "SessionRecorder",
    "StoreHealth",
    "StreamedSession",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallView",
    "TranscriptEntry",
    "call_outcome",
    "canonical_id",
    "check_index",
    "checked_id",
    "compression_summary",
    "describe_compression",
    "format_args",
    "gc_relaxed",
    "html_chunks",
    "is_session_id",
    "iter_transcript",
    "json_chunks",
    "markdown_chunks",
    "redact_record",
    "render",
    "session_facts",
    "session_heading",
    "tool_call_ids",
    "transcript",
    "with_compression_marks",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_checkpoints": (
            "RESTORE_TRIGGER",
            "ResumePoint",
        ),
        "_export": (
            "INTERRUPTED_NOTE",
            "CompressionMark",
            "ExportFormat",
            "NoteBlock",
            "TextBlock",
            "ThinkingBlock",
            "ToolCallView",
            "TranscriptEntry",
            "call_outcome",
            "compression_summary",
            "describe_compression",
            "format_args",
            "html_chunks",
            "iter_transcript",
            "json_chunks",
            "markdown_chunks",
            "render",
            "session_facts",
            "session_heading",
            "transcript",
            "with_compression_marks",
        ),
        "_fork": (
            "FORKED_FROM",
            "ForkOrigin",
            "ForkResult",
            "check_index",
            "tool_call_ids",
        ),
        "_ids": (
            "canonical_id",
            "checked_id",
            "is_session_id",
        ),
        "_recorder": (
            "SessionRecorder",
            "redact_record",
        ),
        "_store": ("ChatRecordingService",),
        "_stream": (
            "StreamedSession",
            "gc_relaxed",
        ),
        # records the store answers with, light enough for a thin client
        "ollm_cli.pipeline.records": (
            "MARK_END",
            "MARK_START",
            "CloseReport",
            "SearchHit",
            "StoreHealth",
        ),
    },
)
