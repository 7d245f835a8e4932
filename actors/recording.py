"""The recording actor: the ChatRecordingService, the only writer of session files.

Calls arrive from many conversations at once on the actor's threads; the
store's group commit turns them into few fsyncs. Nothing is decided here:
recording (redaction, answers with their usage, turn ends and ``autoSave``) is
the :class:`~ollm_cli.pipeline.recording.SessionRecorder` this shell is, and
the other methods hand over to the store.
"""

from __future__ import annotations

from typing import Any

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.recording import (
    ChatRecordingService,
    CloseReport,
    ResumePoint,
    SearchHit,
    SessionRecorder,
    StoreHealth,
)
from ollm_cli.pipeline.records import Session, SessionSummary


class RecordingShell(SessionRecorder, ShellBase):
    """Gives the ChatRecordingService an inbox (``record_*``, ``end_turn``,
    ``save_session``, ``close_session``: see SessionRecorder)."""

    def __init__(self, settings: OllmSettings) -> None:
        session = settings.services.session
        store = ChatRecordingService(session, snapshots_dir=settings.snapshots.data_dir)
        super().__init__(store, session)

    def create_session(self, model: str, provider: str, **options: Any) -> str:
        return self.store.create_session(model, provider, **options)

    def open_session(self, session_id: str) -> Session:
        return self.store.open_session(session_id)

    def open_for_resume(self, session_id: str) -> ResumePoint:
        return self.store.open_for_resume(session_id)

    def add_usage(self, session_id: str, *, prompt_tokens: int, completion_tokens: int) -> None:
        self.store.add_usage(
            session_id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )

    def set_token_count(self, session_id: str, token_count: int) -> None:
        self.store.set_token_count(session_id, token_count)

    def update_metadata(self, session_id: str, **fields: Any) -> None:
        self.store.update_metadata(session_id, **fields)

    def set_title(self, session_id: str, title: str) -> None:
        self.store.set_title(session_id, title)

    def switch_model(self, session_id: str, change: dict[str, Any]) -> None:
        self.store.switch_model(session_id, change)

    def get_session(self, session_id: str) -> Session:
        return self.store.get_session(session_id)

    def list_sessions(self, **filters: Any) -> list[SessionSummary]:
        return self.store.list_sessions(**filters)

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        return self.store.search(query, limit=limit)

    def count_sessions(self) -> int:
        return self.store.count_sessions()

    def health(self) -> StoreHealth:
        return self.store.health()

    def take_notices(self) -> list[str]:
        return self.store.take_notices()

    def close(self) -> CloseReport:
        return self.store.close()

    def discard_if_unanswered(self, session_id: str) -> bool:
        """Close a session this command created; delete it when nothing answered in
        it: no message, or only the user's of turns that failed (whether it did)."""
        self.close_session(session_id)
        if any(m.role != "user" for m in self.store.get_session(session_id).messages):
            return False
        self.store.delete_session(session_id)
        return True
