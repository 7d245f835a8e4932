"""The verification pass of a load or soak run: nothing acknowledged is missing.

Every message the harness sent and every answer it received must be in the
recorded sessions, in order; :func:`verify` reads them back through the
recording actor and lists what is missing.

Example::

    verification = await verify(coordinator.runtime, run.transcripts)
    verification.ok, verification.missing
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.harness._load_models import MissingMessage, Verification
from ollm_cli.pipeline.records import Session

if TYPE_CHECKING:  # the runtime is the caller's: the thin client imports none
    from ollm_cli.pipeline.runtime import Runtime

logger = logging.getLogger(__name__)

MISSING_SHOWN = 20


@dataclass
class Exchange:
    """One turn as the harness saw it: what it sent and the answer it got."""

    sent: str
    answer: str


@dataclass
class Transcript:
    """The turns of one conversation that the harness saw succeed."""

    session_id: str
    exchanges: list[Exchange] = field(default_factory=list)

    def expected(self) -> list[tuple[str, str]]:
        """The (role, text) messages that must be in the session, in this order."""
        messages: list[tuple[str, str]] = []
        for exchange in self.exchanges:
            messages.append(("user", exchange.sent))
            if exchange.answer:
                messages.append(("assistant", exchange.answer))
        return messages


def missing_in_order(
    expected: Sequence[tuple[str, str]], recorded: Sequence[tuple[str, str]]
) -> list[int]:
    """Indexes of ``expected`` items not found, in order, as a subsequence of ``recorded``."""
    missing: list[int] = []
    position = 0
    for index, item in enumerate(expected):
        found = next((j for j in range(position, len(recorded)) if recorded[j] == item), None)
        if found is None:
            missing.append(index)
        else:
            position = found + 1
    return missing


async def verify(
    runtime: Runtime, transcripts: Sequence[Transcript], *, concurrency: int = 16
) -> Verification:
    """Check every transcript against its recorded session (through the recording actor)."""

    async def fetch(session_id: str) -> Session:
        session: Session = await runtime.recording.call(RecordingShell.get_session, session_id)
        return session

    return await verify_with(fetch, transcripts, concurrency=concurrency)


async def verify_with(
    fetch: Callable[[str], Awaitable[Session]],
    transcripts: Sequence[Transcript],
    *,
    concurrency: int = 16,
) -> Verification:
    """:func:`verify` with any way of reading a session (a store, a folder, an actor)."""
    gate = asyncio.Semaphore(concurrency)
    expected_total = 0
    found_total = 0
    unreadable = 0
    missing: list[MissingMessage] = []

    async def check(transcript: Transcript) -> None:
        nonlocal expected_total, found_total, unreadable
        expected = transcript.expected()
        expected_total += len(expected)
        try:
            async with gate:
                session = await fetch(transcript.session_id)
        except OllmError as error:
            logger.warning("verification: session %s unreadable: %s", transcript.session_id, error)
            unreadable += 1
            return
        recorded = [(m.role, m.text) for m in session.messages]
        lost = missing_in_order(expected, recorded)
        found_total += len(expected) - len(lost)
        for index in lost:
            if len(missing) < MISSING_SHOWN:
                role, text = expected[index]
                missing.append(
                    MissingMessage(
                        session_id=transcript.session_id,
                        position=index,
                        role=role,
                        text=text[:200],
                    )
                )

    await asyncio.gather(*(check(t) for t in transcripts))
    return Verification(
        conversations=len(transcripts),
        expected_messages=expected_total,
        found_messages=found_total,
        unreadable_sessions=unreadable,
        missing=missing,
    )
