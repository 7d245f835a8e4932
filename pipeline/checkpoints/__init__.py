"""Workspace checkpoints: the previous state of the files tools change, for rewinds.

Before a tool changes files its previous state is kept (content-addressed,
compressed, deduplicated; bounded per session by ``checkpoints.maxMb`` of disk,
the log included, and per tool call by ``checkpoints.maxPathsPerCall`` paths), so
that ``ollm sessions rewind`` and the chat's ``/rewind`` put the workspace back as
it was at a message of the conversation, file by file, never touching files the
tools did not change; what could not be kept or recorded is named instead.

Example::

    checkpoints = WorkspaceCheckpoints.of_session(root, sid, settings.checkpoints)
    pending = checkpoints.before(workspace, ["a.txt"])      # None: a shell command
    ...                                                      # the tool runs
    checkpoints.after(pending, "call-1")
    plan = plan_rewind(checkpoints.changes(), {"call-1"})
    apply_rewind(plan, checkpoints.blobs, on_conflict="keep").items

The names below are imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.checkpoints._blobs import BlobStore
    from ollm_cli.pipeline.checkpoints._budget import StoreBudget
    from ollm_cli.pipeline.checkpoints._changes import (
        ChangeLog,
        FileChange,
        FileState,
        LogEntry,
        UnrecordedPaths,
        changed_note,
    )
    from ollm_cli.pipeline.checkpoints._layer import remove_layer
    from ollm_cli.pipeline.checkpoints._recorder import PendingCheckpoint, WorkspaceCheckpoints
    from ollm_cli.pipeline.checkpoints._rewind import (
        OnConflict,
        PathRewind,
        RewindConflict,
        RewindFailed,
        RewindItem,
        RewindReport,
        apply_rewind,
        plan_rewind,
    )

__all__ = [
    "BlobStore",
    "ChangeLog",
    "FileChange",
    "FileState",
    "LogEntry",
    "OnConflict",
    "PathRewind",
    "PendingCheckpoint",
    "RewindConflict",
    "RewindFailed",
    "RewindItem",
    "RewindReport",
    "StoreBudget",
    "UnrecordedPaths",
    "WorkspaceCheckpoints",
    "apply_rewind",
    "changed_note",
    "plan_rewind",
    "remove_layer",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_blobs": ("BlobStore",),
        "_budget": ("StoreBudget",),
        "_changes": (
            "ChangeLog",
            "FileChange",
            "FileState",
            "LogEntry",
            "UnrecordedPaths",
            "changed_note",
        ),
        "_layer": ("remove_layer",),
        "_recorder": ("PendingCheckpoint", "WorkspaceCheckpoints"),
        "_rewind": (
            "OnConflict",
            "PathRewind",
            "RewindConflict",
            "RewindFailed",
            "RewindItem",
            "RewindReport",
            "apply_rewind",
            "plan_rewind",
        ),
    },
)
