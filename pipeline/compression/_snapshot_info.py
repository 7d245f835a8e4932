"""What ``ollm snapshots list`` and ``/snapshot`` show of one snapshot of a
session's active context: light enough for a thin client of the service, which
imports neither the SnapshotManager nor the session store.

Example::

    info = SnapshotInfo(id="3f1c2a9e0b7d", session_id=sid, timestamp=now_iso(),
                        token_count=1200, summary="We agreed on X.", reason="manual")
"""

from __future__ import annotations

from typing import Literal

from ollm_cli.pipeline.records import Record, Timestamp

SnapshotReason = Literal["auto", "manual"]


class SnapshotInfo(Record):
    """One entry of a session's snapshot index: what ``list`` shows."""

    id: str
    session_id: str
    timestamp: Timestamp
    token_count: int
    summary: str
    reason: SnapshotReason
    message_count: int = 0
    user_message_count: int = 0
