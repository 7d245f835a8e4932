"""Redacting secrets out of records before they are written to a session.

Every string inside a message or tool call (text, arguments, results, unknown
fields) goes through the :class:`~ollm_cli.pipeline.environment._redaction.Redactor`; a record with
nothing to redact is returned as it was, without a copy.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ollm_cli.pipeline.environment import Redactor
from ollm_cli.pipeline.records import Record

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
