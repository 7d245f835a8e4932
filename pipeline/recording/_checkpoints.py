"""Checkpoints in the session file: what a resume rebuilds the active context from.

Each compression appends to ``metadata.compressionHistory`` an entry whose
``checkpoint`` (:class:`~ollm_cli.pipeline.records.CompressionCheckpoint`) is the
active context it left, by position in ``messages``. The session's messages
stay complete; a resume takes the latest checkpoint and the messages it names
instead of all of them (:func:`resume_point`), so a compressed session of ten
thousand messages resumes without building models for the thousands it stands
for.

A checkpoint is used only while it still matches the file: the messages it
covers must be the ones it was made from (``fingerprint``, a digest of their
file data, taken by the store when the checkpoint is recorded). One that does
not match (the file was edited, messages were imported) is ignored with the
reason, and the session resumes from its whole history.

Example::

    point = resume_point(doc.data)       # in the store, under the session's lock
    if point.problem:
        logger.warning("checkpoint ignored: %s", point.problem)
    context = ActiveContext.from_resume_point(point, system_prompt)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import Field, ValidationError

from ollm_cli.pipeline.recording._document import SessionDocument
from ollm_cli.pipeline.records import CompressionCheckpoint, Record, Session, SessionMessage

RESTORE_TRIGGER = "restore"
"""The ``trigger`` of a history entry left by a snapshot restore (not a compression)."""


def messages_digest(messages: Sequence[dict[str, Any]]) -> str:
    """A digest of messages as file data (camelCase dicts), to tell a file edited since."""
    # an edit detector, not a seal against forgery: SHA-1 is the fastest digest
    # hashlib has here (the CPU computes it), and resumes hash megabytes
    import hashlib  # loads OpenSSL: 2 ms that listing sessions need not pay

    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(str(len(messages)).encode())
    digest.update(orjson.dumps(list(messages)))
    return digest.hexdigest()


def latest_checkpoint_data(history: Sequence[Any]) -> dict[str, Any] | None:
    """The ``checkpoint`` of the newest history entry that has one (file data)."""
    for entry in reversed(history):
        if isinstance(entry, dict) and isinstance(entry.get("checkpoint"), dict):
            return entry["checkpoint"]
    return None


def checkpoint_problem(
    checkpoint: CompressionCheckpoint, messages: Sequence[dict[str, Any]]
) -> str | None:
    """Why ``checkpoint`` cannot stand for the start of ``messages`` (``None``: it can)."""
    if checkpoint.covers_through > len(messages):
        return (
            f"it covers {checkpoint.covers_through} messages but the file has only {len(messages)}"
        )
    previous = -1
    for entry in checkpoint.head:
        if isinstance(entry, int):
            if not previous < entry < checkpoint.covers_through:
                return f"it names message {entry}, which is not among those it covers"
            previous = entry
    if checkpoint.fingerprint is None:
        return "it was recorded without a fingerprint of the messages it covers"
    if messages_digest(messages[: checkpoint.covers_through]) != checkpoint.fingerprint:
        return "the messages it covers were changed since it was made"
    return None


class ResumePoint(Record):
    """What a resume needs of a session file, read under its lock.

    ``session`` is the session with only the messages the active context
    needs (none of its tool calls): with a usable ``checkpoint``, the head
    messages it names by position followed by every message from
    ``coversThrough`` on; without one, all messages. ``messageCount`` is how
    many messages the file has. ``problem`` says why the latest checkpoint was
    not used, if there was one.
    """

    session: Session
    message_count: int
    checkpoint: CompressionCheckpoint | None = None
    problem: str | None = None
    head: list[SessionMessage] = Field(default_factory=list)
    """The checkpoint's head, resolved: session messages and shortened copies, in order."""
    rest: list[SessionMessage] = Field(default_factory=list)
    """The messages from ``coversThrough`` on (all of them without a checkpoint)."""


def resume_point(data: dict[str, Any]) -> ResumePoint:
    """The :class:`ResumePoint` of a session held as file data (see the module doc)."""
    messages: list[dict[str, Any]] = data["messages"]
    history = (data.get("metadata") or {}).get("compressionHistory") or []
    checkpoint: CompressionCheckpoint | None = None
    problem: str | None = None
    raw = latest_checkpoint_data(history)
    if raw is not None:
        try:
            checkpoint = CompressionCheckpoint.model_validate(raw)
        except ValidationError as error:
            problem = f"it is not a valid checkpoint ({error.error_count()} problems)"
        else:
            problem = checkpoint_problem(checkpoint, messages)
        if problem is not None:
            checkpoint = None
    if checkpoint is None:
        needed = messages
        positions: list[int] = []
    else:
        positions = [entry for entry in checkpoint.head if isinstance(entry, int)]
        needed = [messages[p] for p in positions] + messages[checkpoint.covers_through :]
    light = SessionDocument({**data, "messages": needed, "toolCalls": []}, 0, 0).to_session()
    point = ResumePoint(
        session=light,
        message_count=len(messages),
        checkpoint=checkpoint,
        problem=problem,
    )
    if checkpoint is None:
        point.rest = list(light.messages)
        return point
    built = iter(light.messages[: len(positions)])
    point.head = [next(built) if isinstance(e, int) else e for e in checkpoint.head]
    point.rest = list(light.messages[len(positions) :])
    return point
