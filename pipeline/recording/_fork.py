"""Forking a session: a new session holding a prefix of another, the original untouched.

Spec 003's principle stands: a session file is never rewritten to go back; a
branch is added instead. :meth:`Forking.fork` reads the parent as a reader does
(its file plus the records a live writer has journaled, no lock: forking a
session another client holds is allowed) and writes a new, complete session in
the spec's format holding:

- the parent's messages ``[0, at)``, with their original timestamps (a partial
  answer still streaming is left out);
- the tool calls those messages asked for (matched by id);
- the parent's metadata, with ``forkedFrom: {sessionId, messageIndex}`` added,
  and of ``compressionHistory`` only the events whose checkpoint lies within the
  prefix (``coversThrough <= at``; an event without checkpoint when it is older
  than the first message left out). Its usage counters start again at 0 unless
  the whole session is kept: they count what the parent spent.

Example::

    result = store.fork_session("3f1c2a9e", at=4, title="try the other way")
    result.session_id, result.message_index       # the new id, 4
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording._checkpoints import RESTORE_TRIGGER
from ollm_cli.pipeline.recording._document import PARTIAL_KEY, SessionDocument
from ollm_cli.pipeline.recording._ids import new_session_id
from ollm_cli.pipeline.recording._sessions import OpenSessions, SessionFolder, invalid_reason
from ollm_cli.pipeline.records import Record, now_iso, parse_iso
from ollm_cli.pipeline.terminal_text import has_control
from ollm_cli.pipeline.title_text import clean_title

logger = logging.getLogger(__name__)

FORKED_FROM = "forkedFrom"
"""The metadata key naming a fork's parent: ``{"sessionId": ..., "messageIndex": N}``."""


class ForkOrigin(Record):
    """``metadata.forkedFrom``: the parent session and how many of its messages were kept."""

    session_id: str
    message_index: int


class ForkResult(Record):
    """What :meth:`Forking.fork` made."""

    session_id: str
    forked_from: ForkOrigin
    message_count: int
    tool_call_count: int
    tool_call_ids: list[str]
    """The ids of the tool calls the fork kept (their workspace checkpoints carry over)."""
    cut_at: str | None = None
    """The timestamp of the parent's first message left out (None: all were kept)."""


def tool_call_ids(messages: list[dict[str, Any]]) -> set[str]:
    """The ids of the tool calls that ``messages`` (file data) ask for or answer."""
    ids: set[str] = set()
    for message in messages:
        for part in message.get("parts") or ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_call" and isinstance(part.get("id"), str):
                ids.add(part["id"])
            elif part.get("type") == "tool_result" and isinstance(part.get("toolCallId"), str):
                ids.add(part["toolCallId"])
    return ids


def check_index(at: int | None, total: int, sid: str) -> int:
    """``at`` checked against a session of ``total`` messages (None: all of them)."""
    if at is None:
        return total
    if at < 0 or at > total:
        raise SessionError(
            f"message {at} is beyond session {sid}: it has {total} message(s)",
            hint=f"give a number from 0 to {total} (`ollm sessions view {sid[:8]}` shows them)",
        )
    return at


def _kept_history(history: list[Any], at: int, cut_at: str | None) -> list[Any]:
    """The compression events that still apply to the first ``at`` messages."""
    if cut_at is None:
        return list(history)
    cut = parse_iso(cut_at)
    kept = []
    for event in history:
        if not isinstance(event, dict):
            continue
        checkpoint = event.get("checkpoint")
        if isinstance(checkpoint, dict) and isinstance(checkpoint.get("coversThrough"), int):
            if checkpoint["coversThrough"] <= at and parse_iso(event["timestamp"]) < cut:
                kept.append(event)
        elif isinstance(event.get("timestamp"), str) and parse_iso(event["timestamp"]) < cut:
            kept.append(event)
    return kept


def _fork_metadata(
    parent: dict[str, Any], origin: ForkOrigin, cut_at: str | None, title: str | None
) -> dict[str, Any]:
    """The fork's metadata: the parent's, with the compressions of the messages kept,
    counters reset when messages were left out, the title given and ``forkedFrom``."""
    meta = dict(parent)
    at = origin.message_index
    history = _kept_history(list(meta.get("compressionHistory") or []), at, cut_at)
    meta["compressionHistory"] = history
    meta["compressionCount"] = sum(
        1 for e in history if isinstance(e, dict) and e.get("trigger") != RESTORE_TRIGGER
    )
    if cut_at is not None:
        for counter in ("tokenCount", "promptTokens", "completionTokens", "thinkingTokens"):
            meta[counter] = 0
    if title is not None:
        meta["title"], meta["titleSource"] = clean_title(title), "manual"
    meta[FORKED_FROM] = origin.to_dict()
    return meta


class Forking:
    """Makes forks in one store's folder (the store calls it and keeps the public method)."""

    def __init__(self, folder: SessionFolder, sessions: OpenSessions) -> None:
        self.folder = folder
        self.sessions = sessions

    def fork(
        self, session_id: str, *, at: int | None = None, title: str | None = None
    ) -> ForkResult:
        """A new session holding the parent's first ``at`` messages (None: all)."""
        self.folder.check_open()
        if title is not None and (has_control(title) or not clean_title(title)):
            raise SessionError(
                "a fork's title must be plain, non-empty text",
                hint="give a few words without control characters",
            )
        sid = self.sessions.resolve_id(session_id)
        parent, _ = self.sessions.load(sid)  # the file plus what a live writer journaled; no lock
        messages = parent.messages
        total = len(messages)
        at = check_index(at, total, sid)
        kept = [dict(m) for m in messages[:at]]
        ids = tool_call_ids(kept)
        calls = [dict(c) for c in parent.tool_calls if c.get("id") in ids]
        cut_at = str(messages[at]["timestamp"]) if at < total else None
        origin = ForkOrigin(session_id=sid, message_index=at)
        meta = _fork_metadata(parent.metadata, origin, cut_at, title)
        new_id = new_session_id()
        data = {
            k: v for k, v in parent.data.items() if k not in ("messages", "toolCalls", PARTIAL_KEY)
        }
        data.update(
            sessionId=new_id,
            lastActivity=now_iso(),
            messages=kept,
            toolCalls=calls,
            metadata=meta,
        )
        try:
            doc = SessionDocument.from_data(data, new_id)
            doc.to_session()  # a fork is a complete, valid session in the spec's format
        except (ValidationError, ValueError) as exc:
            reason = invalid_reason(exc) if isinstance(exc, ValidationError) else str(exc)
            raise SessionError(
                f"session {sid} cannot be forked: its records are invalid ({reason})",
                hint=f"`ollm sessions doctor` checks it; `ollm sessions view {sid[:8]}` shows it",
            ) from None
        self.sessions.create(doc, hold=False)
        # not indexed here: the index catches the new file up at its next refresh (the
        # folder changed), so a fork of a long session costs no more than resuming it
        logger.info("forked session %s at message %d of %d as %s", sid, at, total, new_id)
        return ForkResult(
            session_id=new_id,
            forked_from=origin,
            message_count=at,
            tool_call_count=len(calls),
            tool_call_ids=sorted(ids),
            cut_at=cut_at,
        )
