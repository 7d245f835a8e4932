"""The recording actor: the ChatRecordingService, the only writer of session files.

Calls arrive from many conversations at once on the actor's threads; the
store's group commit turns them into few fsyncs. After a restart the store
recovers from disk, and a session that was open before is opened again on
its next record (the store opens it by itself). Text is redacted before it is written when
``services.session.redactSecrets`` is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.environment import Redactor
from ollm_cli.pipeline.recording import (
    ChatRecordingService,
    CloseReport,
    ResumePoint,
    SearchHit,
    StoreHealth,
    redact_record,
)
from ollm_cli.pipeline.records import (
    CompressionEvent,
    Session,
    SessionMessage,
    SessionSummary,
    SessionToolCall,
)


class RecordingShell(ShellBase):
    """Gives the ChatRecordingService an inbox."""

    def __init__(self, settings: OllmSettings) -> None:
        self.settings = settings.services.session
        self.store = ChatRecordingService(self.settings, snapshots_dir=settings.snapshots.data_dir)
        self.redactor: Redactor | None = Redactor() if self.settings.redact_secrets else None

    def add_redaction_values(self, values: Mapping[str, str]) -> int:
        """Also redact these secret values (those the sanitizer removed), by name."""
        return self.redactor.add_values(values) if self.redactor is not None else 0

    def create_session(self, model: str, provider: str, **options: Any) -> str:
        return self.store.create_session(model, provider, **options)

    def open_session(self, session_id: str) -> Session:
        return self.store.open_session(session_id)

    def record_message(self, session_id: str, message: SessionMessage) -> bool:
        """Record one message; True once durable (False: kept and retried, see health)."""
        if self.redactor is not None:
            message = redact_record(message, self.redactor)
        return self.store.record_message(session_id, message)

    def record_partial(self, session_id: str, message: SessionMessage) -> bool:
        """Record the part of an answer shown so far (see ChatRecordingService.record_partial)."""
        if self.redactor is not None:
            message = redact_record(message, self.redactor)
        return self.store.record_partial(session_id, message)

    def record_tool_call(self, session_id: str, call: SessionToolCall) -> bool:
        if self.redactor is not None:
            call = redact_record(call, self.redactor)
        return self.store.record_tool_call(session_id, call)

    def record_answer(
        self,
        session_id: str,
        message: SessionMessage,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        turn_end_tokens: int | None = None,
    ) -> bool:
        """The model's answer and the usage the server reported: one call, one fsync.

        An answer that ends the turn carries the turn end too
        (``turn_end_tokens``: the context's token count then, see :meth:`end_turn`).
        """
        self.store.add_usage(
            session_id,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            durable=False,
        )
        durable = self.record_message(session_id, message)
        if turn_end_tokens is not None:
            self.end_turn(session_id, turn_end_tokens)
        return durable

    def add_usage(self, session_id: str, *, prompt_tokens: int, completion_tokens: int) -> None:
        self.store.add_usage(
            session_id, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )

    def set_token_count(self, session_id: str, token_count: int) -> None:
        self.store.set_token_count(session_id, token_count)

    def record_compression(self, session_id: str, event: CompressionEvent) -> None:
        """One compression and the checkpoint it left (its summary and shortened
        copies redacted like any message)."""
        if self.redactor is not None:
            event = redact_record(event, self.redactor)
        self.store.record_compression(session_id, event)

    def open_for_resume(self, session_id: str) -> ResumePoint:
        """Resume from the latest checkpoint (see :meth:`ChatRecordingService.open_for_resume`)."""
        return self.store.open_for_resume(session_id)

    def update_metadata(self, session_id: str, **fields: Any) -> None:
        self.store.update_metadata(session_id, **fields)

    def set_title(self, session_id: str, title: str) -> None:
        self.store.set_title(session_id, title)

    def end_turn(self, session_id: str, token_count: int) -> None:
        """Turn end: keep the context's token count and bring the file up to date
        (``autoSave``), after ``saveDelayMs`` so that quick turns share one rewrite."""
        self.store.set_token_count(session_id, token_count, durable=False)
        if self.settings.auto_save:  # the file it writes holds the count
            self.store.save_session_soon(session_id, self.settings.save_delay_ms / 1000)

    def save_session(self, session_id: str) -> None:
        if self.store.is_open(session_id):
            self.store.save_session(session_id)

    def close_session(self, session_id: str) -> None:
        if self.store.is_open(session_id):
            self.store.close_session(session_id)

    def get_session(self, session_id: str) -> Session:
        return self.store.get_session(session_id)

    def list_sessions(self, **filters: Any) -> list[SessionSummary]:
        return self.store.list_sessions(**filters)

    def search(self, query: str, limit: int = 20) -> list[SearchHit]:
        return self.store.search(query, limit=limit)

    def count_sessions(self) -> int:
        return self.store.count_sessions()

    def health(self) -> StoreHealth:
        """Pending writes and the last write error, for status lines and harnesses."""
        return self.store.health()

    def take_notices(self) -> list[str]:
        """Lines the user should see once: sessions moved to the trash, rescued records
        replayed, damaged files met."""
        return self.store.take_notices()

    def close(self) -> CloseReport:
        """Close the store; the report says what could not be made durable, and where
        it was rescued to (closing again returns the same report)."""
        return self.store.close()
