"""Recording a conversation's turns: secrets redacted, answers whole, turn ends saved.

:class:`SessionRecorder` is what the recording actor delegates to. It wraps a
:class:`~ollm_cli.pipeline.recording._store.ChatRecordingService` and adds the
turn-level rules of ``services.session``:

- with ``redactSecrets`` on, every string inside a message, tool call or
  compression event (text, arguments, results, unknown fields) goes through a
  :class:`~ollm_cli.base.redaction.Redactor` before it is
  written, with the secret values the sanitizer removed added by name; a record
  with nothing to redact is written as it was, without a copy;
- an answer is recorded with the usage the server reported, and the turn end
  it may carry, in one call (one fsync);
- at a turn end the context's token count is kept and, with ``autoSave``, the
  file is brought up to date after ``saveDelayMs`` (quick turns share one rewrite).

Example::

    recorder = SessionRecorder(store, settings.services.session)
    recorder.record_message(sid, SessionMessage.user("my key is sk-..."))  # redacted
    recorder.record_answer(sid, answer, prompt_tokens=5, completion_tokens=2, turn_end_tokens=9)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.environment import Redactor
from ollm_cli.pipeline.records import CompressionEvent, Record, SessionMessage, SessionToolCall

if TYPE_CHECKING:
    from ollm_cli.pipeline.recording._store import ChatRecordingService

R = TypeVar("R", bound=Record)


def _walk(value: Any, redactor: Redactor) -> tuple[Any, bool]:
    if isinstance(value, str):
        cleaned = redactor.redact(value)
        return cleaned, cleaned != value
    if isinstance(value, dict):
        changed = False
        for key, item in value.items():
            value[key], item_changed = _walk(item, redactor)
            changed = changed or item_changed
        return value, changed
    if isinstance(value, list):
        changed = False
        for index, item in enumerate(value):
            value[index], item_changed = _walk(item, redactor)
            changed = changed or item_changed
        return value, changed
    return value, False


def redact_record(record: R, redactor: Redactor) -> R:
    """``record`` with every secret replaced by ``[REDACTED:<kind>]``."""
    data, changed = _walk(record.model_dump(mode="json", by_alias=True), redactor)
    return type(record).model_validate(data) if changed else record


class SessionRecorder:
    """A store with the turn-level rules of ``services.session`` (see the module)."""

    def __init__(
        self,
        store: ChatRecordingService,
        settings: SessionSettings,
        *,
        redactor: Redactor | None = None,
    ) -> None:
        """``redactor``: the one to use when ``redactSecrets`` is on (a new one by default)."""
        self.store = store
        self.settings = settings
        self.redactor: Redactor | None = None
        if settings.redact_secrets:
            self.redactor = redactor if redactor is not None else Redactor()

    def add_redaction_values(self, values: Mapping[str, str]) -> int:
        """Also redact these secret values (those the sanitizer removed), by name;
        returns how many were added (0 when ``redactSecrets`` is off)."""
        return self.redactor.add_values(values) if self.redactor is not None else 0

    def redacted(self, record: R) -> R:
        """``record`` as it may be written (unchanged when ``redactSecrets`` is off)."""
        return redact_record(record, self.redactor) if self.redactor is not None else record

    def record_message(self, session_id: str, message: SessionMessage) -> bool:
        """Record one message; True once durable (False: kept and retried, see health)."""
        return self.store.record_message(session_id, self.redacted(message))

    def record_partial(self, session_id: str, message: SessionMessage) -> bool:
        """Record the part of an answer shown so far (see ChatRecordingService.record_partial)."""
        return self.store.record_partial(session_id, self.redacted(message))

    def record_tool_call(self, session_id: str, call: SessionToolCall) -> bool:
        return self.store.record_tool_call(session_id, self.redacted(call))

    def record_compression(self, session_id: str, event: CompressionEvent) -> None:
        """One compression and the checkpoint it left (its summary and shortened
        copies redacted like any message)."""
        self.store.record_compression(session_id, self.redacted(event))

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

    def end_turn(self, session_id: str, token_count: int) -> None:
        """Turn end: keep the context's token count and bring the file up to date
        (``autoSave``), after ``saveDelayMs`` so that quick turns share one rewrite.

        The secrets the redactor found in passing are forgotten: a copy of one is
        masked by its value within its turn only (registered values stay)."""
        self.store.set_token_count(session_id, token_count, durable=False)
        if self.redactor is not None:
            self.redactor.forget_learned()
        if self.settings.auto_save:  # the file it writes holds the count
            self.store.save_session_soon(session_id, self.settings.save_delay_ms / 1000)

    def save_session(self, session_id: str) -> None:
        """Bring the file up to date, if the session is open here (else nothing to do)."""
        if self.store.is_open(session_id):
            self.store.save_session(session_id)

    def close_session(self, session_id: str) -> None:
        """Close the session, if it is open here."""
        if self.store.is_open(session_id):
            self.store.close_session(session_id)
