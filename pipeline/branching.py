"""Going back: fork a conversation, or rewind it with the workspace's files.

Both add a branch and remove nothing (spec 003): the session's file, its
snapshots and its workspace checkpoints stay as they are.

- :func:`fork_conversation` makes a new session holding the first N messages
  (:meth:`~ollm_cli.pipeline.recording.ChatRecordingService.fork_session`) and
  gives it what applies to that prefix: the context snapshots taken before
  message N+1 was recorded, and the workspace checkpoints of the tool calls it
  kept (so the fork can itself be rewound).
- :func:`rewind_conversation` puts the workspace's files back as they were at
  message N (undoing, file by file, what the tool calls after it changed), then
  continues the conversation as a fork at N, so that the abandoned branch stays
  resumable by its id; it returns the prompt of message N+1 for editing. Files
  are checked (conflicts, a damaged store, a moved or read-only workspace) before
  anything changes; a failure leaves no fork behind.

Example::

    branches = Branching(store, settings)
    result = branches.rewind("3f1c2a9e", to=4, on_conflict="keep")
    result.fork.session_id, result.prompt, result.files.items
"""

from __future__ import annotations

import logging
from pathlib import Path

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.checkpoints import (
    OnConflict,
    RewindReport,
    WorkspaceCheckpoints,
    apply_rewind,
    plan_rewind,
)
from ollm_cli.pipeline.compression import SnapshotManager
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.recording import (
    ChatRecordingService,
    ForkResult,
    check_index,
    tool_call_ids,
)
from ollm_cli.pipeline.records import Record, parse_iso

logger = logging.getLogger(__name__)


class RewindResult(Record):
    """What a rewind did: the fork the conversation continues in (None: files only),
    the files put back (None: conversation only), and the prompt to edit."""

    session_id: str
    message_index: int
    fork: ForkResult | None = None
    files: RewindReport | None = None
    prompt: str | None = None
    """The text of message N+1 when it is the user's: offered for editing."""


class Branching:
    """Forks and rewinds over one store, its snapshots and its checkpoints."""

    def __init__(self, store: ChatRecordingService, settings: OllmSettings) -> None:
        self.store = store
        self.settings = settings
        self.root: Path = settings.snapshots.data_dir

    def checkpoints(self, session_id: str) -> WorkspaceCheckpoints:
        """The workspace checkpoints of a session."""
        return WorkspaceCheckpoints.of_session(self.root, session_id, self.settings.checkpoints)

    def fork(
        self, session_id: str, *, at: int | None = None, title: str | None = None
    ) -> ForkResult:
        """A fork holding the first ``at`` messages (None: all), with the snapshots and
        checkpoints that apply to them."""
        result = self.store.fork_session(session_id, at=at, title=title)
        parent = result.forked_from.session_id
        try:
            self.checkpoints(parent).carry_over(
                self.checkpoints(result.session_id), set(result.tool_call_ids)
            )
            self._carry_snapshots(parent, result)
        except (OSError, OllmError) as error:  # the fork stands; its extras are best effort
            logger.warning(
                "fork %s: its checkpoints or snapshots were not all copied: %s",
                result.session_id,
                error,
            )
        return result

    def _carry_snapshots(self, parent: str, result: ForkResult) -> int:
        snapshots = SnapshotManager(self.settings.snapshots, root=self.root)
        cut = parse_iso(result.cut_at) if result.cut_at else None
        copied = 0
        for info in reversed(snapshots.list_snapshots(parent)):  # oldest first
            if cut is not None and parse_iso(info.timestamp) >= cut:
                continue
            snapshot = snapshots.get_snapshot(info.id)
            snapshots.create_snapshot(
                result.session_id,
                snapshot.to_context(),
                token_count=snapshot.token_count,
                summary=snapshot.summary,
                reason=snapshot.reason,
                model=snapshot.metadata.model,
                context_size=snapshot.metadata.context_size,
            )
            copied += 1
        return copied

    def rewind(
        self,
        session_id: str,
        *,
        to: int,
        files: bool = True,
        conversation: bool = True,
        on_conflict: OnConflict = "refuse",
        workspace: Path | None = None,
    ) -> RewindResult:
        """Put the files back as they were at message ``to`` (``files``) and continue the
        conversation as a fork at ``to`` (``conversation``)."""
        sid = self.store.resolve_id(session_id)
        session = self.store.get_session(sid)
        to = check_index(to, len(session.messages), sid)
        report: RewindReport | None = None
        if files:
            kept = tool_call_ids([m.to_dict() for m in session.messages[:to]])
            checkpoints = self.checkpoints(sid)
            changes = checkpoints.changes()
            undo = {c.tool_call_id for c in changes if c.tool_call_id not in kept}
            report = apply_rewind(
                plan_rewind(changes, undo),
                checkpoints.blobs,
                on_conflict=on_conflict,
                workspace=workspace,
            )
        fork = self.fork(sid, at=to) if conversation else None
        nxt = session.messages[to] if to < len(session.messages) else None
        prompt = nxt.text if nxt is not None and nxt.role == "user" else None
        return RewindResult(
            session_id=sid, message_index=to, fork=fork, files=report, prompt=prompt
        )
