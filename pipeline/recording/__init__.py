"""The ChatRecordingService: durable sessions (journal, files, index), export, titles."""

from __future__ import annotations

from ollm_cli.pipeline.recording._export import (
    ExportFormat,
    NoteBlock,
    TextBlock,
    ToolCallView,
    call_outcome,
    format_args,
    render,
    session_facts,
    session_heading,
    transcript,
)
from ollm_cli.pipeline.recording._index import MARK_END, MARK_START, SearchHit
from ollm_cli.pipeline.recording._redaction import redact_record
from ollm_cli.pipeline.recording._store import ChatRecordingService, StoreHealth

__all__ = [
    "MARK_END",
    "MARK_START",
    "ChatRecordingService",
    "ExportFormat",
    "NoteBlock",
    "SearchHit",
    "StoreHealth",
    "TextBlock",
    "ToolCallView",
    "call_outcome",
    "format_args",
    "redact_record",
    "render",
    "session_facts",
    "session_heading",
    "transcript",
]
