"""Journaled changes folded into a session document, or a session rebuilt from them."""

from __future__ import annotations

import logging

from ollm_cli.pipeline.recording._document import DocumentError, SessionDocument
from ollm_cli.pipeline.recording._journal import JournalEntry, decode_change

logger = logging.getLogger(__name__)


def replay(doc: SessionDocument, entries: list[JournalEntry]) -> None:
    """Apply the entries of ``doc``'s incarnation newer than it, in order, once each."""
    newer = sorted(
        {e.seq: e for e in entries if e.epoch == doc.epoch and e.seq > doc.seq}.values(),
        key=lambda e: e.seq,
    )
    for entry in newer:
        if entry.seq != doc.seq + 1:
            logger.warning(
                "session %s: journal record %d missing; later records are ignored",
                doc.session_id,
                doc.seq + 1,
            )
            return
        doc.apply(decode_change(entry.payload))
        doc.seq = entry.seq


def rebuild_from_journal(sid: str, entries: list[JournalEntry]) -> SessionDocument | None:
    """The session rebuilt from its journal alone, if the journal holds it from creation."""
    created = [e for e in entries if e.seq == 0]
    if not created:
        return None
    epoch = created[-1].epoch
    header = decode_change(created[-1].payload).get("n")
    if not isinstance(header, dict):
        return None
    try:
        doc = SessionDocument.from_data({**header, "messages": [], "toolCalls": []}, sid)
    except DocumentError:
        return None
    doc.epoch, doc.seq = epoch, 0
    replay(doc, entries)
    return doc
