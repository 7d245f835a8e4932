"""The active context of one session: what is sent to the model (spec 003's layers).

System prompt, checkpoints (the compressed past, each a system message marked
as a summary), the user messages spec 003 keeps, and the recent messages. The
session file keeps every message; this is the view a request is built from,
and what a compression, a snapshot and a resume produce.

Example::

    context = ActiveContext(system_prompt="You help.", messages=session.messages)
    context.request_messages()          # checkpoints first, then the live messages
    is_checkpoint(checkpoint_message("We agreed on X."))   # True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson
from pydantic import Field

from ollm_cli.pipeline.records import (
    CompressionCheckpoint,
    Record,
    Session,
    SessionMessage,
)

if TYPE_CHECKING:  # a thin client decodes a context without the token counter (tiktoken)
    from ollm_cli.pipeline.compression._tokens import TokenCounter
    from ollm_cli.pipeline.recording import ResumePoint

SUMMARY_MARKER = "[Summary of the earlier conversation]"


def is_checkpoint(message: SessionMessage) -> bool:
    """Whether ``message`` is a checkpoint (a summary written by compression)."""
    return bool((message.model_extra or {}).get("checkpoint"))


def checkpoint_message(summary: str) -> SessionMessage:
    """A checkpoint: a system message holding ``summary``, marked as a summary."""
    return SessionMessage.model_validate(
        {
            "role": "system",
            "parts": [{"type": "text", "text": f"{SUMMARY_MARKER}\n{summary}"}],
            "checkpoint": True,
        }
    )


def checkpoint_text(message: SessionMessage) -> str:
    """The summary held by a checkpoint, without its marker line."""
    return message.text.removeprefix(SUMMARY_MARKER).strip()


class ActiveContext(Record):
    """What is sent to the model for one session: the three layers of spec 003.

    ``messages`` are the live messages after the checkpoints. The session's
    messages ``[0, covers_through)`` are accounted for by the checkpoints and by
    the first ``covered_head`` live messages (user messages kept verbatim,
    shortened tool results); the live messages after those are the session's
    messages from ``covers_through`` on, verbatim. A context built from a whole
    session has ``covers_through == covered_head == 0``.

    The coordinator appends each new message to ``messages``.

    The compression state travels with the context (so it holds whichever
    process or actor compresses next): ``summary_failures`` counts refused
    summaries in a row (at ``maxFailures`` automatic summarizing pauses until
    ``/compress``), and ``compress_after``, set after a compression that freed
    almost nothing, holds automatic compression back until checkpoints and
    messages grow past it.

    ``head_positions`` says, for each of the first ``covered_head`` live
    messages, which session message it is (``None``: a shortened copy), so
    that :meth:`checkpoint` can name the messages by position in the file.
    """

    system_prompt: str = ""
    checkpoints: list[SessionMessage] = Field(default_factory=list)
    messages: list[SessionMessage] = Field(default_factory=list)
    covers_through: int = 0
    covered_head: int = 0
    summary_failures: int = 0
    compress_after: int | None = None
    head_positions: list[int | None] = Field(default_factory=list)

    @classmethod
    def from_session(cls, session: Session, system_prompt: str = "") -> ActiveContext:
        """The uncompressed context of a whole session."""
        return cls(system_prompt=system_prompt, messages=list(session.messages))

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: CompressionCheckpoint,
        head: Sequence[SessionMessage],
        rest: Sequence[SessionMessage],
        system_prompt: str = "",
    ) -> ActiveContext:
        """The context a checkpoint recorded: its summary, its ``head`` messages
        (resolved from the file) and the session's messages from
        ``coversThrough`` on (``rest``)."""
        return cls(
            system_prompt=system_prompt,
            checkpoints=[checkpoint_message(checkpoint.summary)] if checkpoint.summary else [],
            messages=[*head, *rest],
            covers_through=checkpoint.covers_through,
            covered_head=len(head),
            head_positions=[e if isinstance(e, int) else None for e in checkpoint.head],
        )

    @classmethod
    def from_resume_point(cls, point: ResumePoint, system_prompt: str = "") -> ActiveContext:
        """The context a session resumes with: from its latest checkpoint, or
        its whole history when it has no usable one."""
        if point.checkpoint is None:
            return cls(system_prompt=system_prompt, messages=list(point.rest))
        return cls.from_checkpoint(point.checkpoint, point.head, point.rest, system_prompt)

    def head_position(self, index: int) -> int | None:
        """The session position of live message ``index`` (``None``: a shortened copy)."""
        if index >= self.covered_head:
            return self.covers_through + index - self.covered_head
        if len(self.head_positions) == self.covered_head:
            return self.head_positions[index]
        return None

    def checkpoint(self) -> CompressionCheckpoint:
        """This context as the session file keeps it (the fingerprint is the store's)."""
        head: list[int | SessionMessage] = []
        for index, message in enumerate(self.messages[: self.covered_head]):
            position = self.head_position(index)
            head.append(message if position is None else position)
        summary = "\n\n".join(checkpoint_text(c) for c in self.checkpoints) or None
        return CompressionCheckpoint(summary=summary, covers_through=self.covers_through, head=head)

    def request_messages(self) -> list[SessionMessage]:
        """The messages of a request, after the system prompt: checkpoints, then live."""
        return [*self.checkpoints, *self.messages]

    def message_tokens(self, counter: TokenCounter) -> int:
        """The tokens of :meth:`request_messages`, counting only what was appended
        since the last count (the counter remembers each list's total)."""
        return counter.count_messages(self.checkpoints) + counter.count_messages(self.messages)

    @property
    def session_length(self) -> int:
        """How many of the session's messages this context accounts for."""
        return self.covers_through + len(self.messages) - self.covered_head

    def fingerprint(self, live: int | None = None) -> str:
        """A digest of the checkpoints and the first ``live`` messages (all by
        default), to tell whether a later context grew from this one."""
        count = len(self.messages) if live is None else live
        digest = hashlib.blake2b(digest_size=16)
        digest.update(str(self.covers_through).encode())
        for index, message in enumerate([*self.checkpoints, *self.messages[:count]]):
            if index == len(self.checkpoints):
                digest.update(b"\x1d")
            digest.update(orjson.dumps(message.to_dict(), default=str))
            digest.update(b"\x1e")
        return digest.hexdigest()
