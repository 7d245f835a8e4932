"""One conversation held by the pipeline host, and the process attached to it.

A :class:`Hosted` conversation keeps what its turns publish (events, approval
questions, how a turn ended) as a list of :data:`TurnItem` with two cursors:
``first``, the index of ``items[0]`` among every item the conversation
produced, and ``read``, the first its client has not read. A client reads with
:meth:`Hosted.take` from its cursor; what every reader has seen is dropped, and
a conversation nobody reads keeps only the newest :data:`KEEP_EVENTS`.

Example::

    hosted = Hosted(sid, coordinator, Client(pid, started))
    hosted.push(TurnEvent(event=event))
    batch = await hosted.take(cursor=0, wait_s=5.0)   # the items, the next cursor
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.service._protocol import (
    SETTLING,
    ApprovalAsked,
    TurnEvent,
    TurnItem,
    TurnItems,
)
from ollm_cli.pipeline.service._state import process_alive

KEEP_EVENTS = 4096
"""A conversation keeps at most this many events no client has read."""


@dataclass
class Client:
    """The process attached to a conversation."""

    pid: int
    started: float | None

    def alive(self) -> bool:
        return process_alive(self.pid, self.started)


@dataclass
class Hosted:
    """One conversation held by the host (see the module)."""

    session_id: str
    coordinator: Coordinator
    client: Client | None
    items: list[TurnItem] = field(default_factory=list)
    first: int = 0
    """The index of ``items[0]`` among every item this conversation produced."""
    read: int = 0
    """The index of the first item its client has not read."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    turn: asyncio.Task[None] | None = None
    approvals: dict[str, asyncio.Future[bool]] = field(default_factory=dict)
    closing: asyncio.Task[None] | None = None
    kinds: frozenset[str] | None = None
    """The event kinds the client wants (``None``: every kind)."""

    def push(self, item: TurnItem) -> None:
        self.items.append(item)
        if len(self.items) > KEEP_EVENTS:  # nobody reads: keep the newest
            drop = len(self.items) - KEEP_EVENTS
            del self.items[:drop]
            self.first += drop
        self.wake.set()

    def turn_running(self) -> bool:
        return self.turn is not None and not self.turn.done()

    def unread_for_new_turn(self) -> int:
        """Before a new turn: keep what happened since the client last read (a
        compression that finished in the background), not what ended an earlier
        turn; the cursor from which the new turn's items are read."""
        unread = max(self.read - self.first, 0)
        events = [item for item in self.items[unread:] if isinstance(item, TurnEvent)]
        del self.items[unread:]
        self.items.extend(events)
        return self.read

    async def take(self, cursor: int, wait_s: float, *, until_done: bool = False) -> TurnItems:
        """The items after ``cursor``, waiting up to ``wait_s`` for one (with
        ``until_done``: for the turn to end or to ask for an approval, so a quick
        turn's events and result come back at once)."""
        deadline = asyncio.get_running_loop().time() + wait_s
        while True:
            new = self.items[max(cursor - self.first, 0) :]
            if new and (not until_done or any(isinstance(item, SETTLING) for item in new)):
                break
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), left)
        start = max(cursor - self.first, 0)
        items = self.items[start:]
        # what every reader has seen can go
        end = self.first + len(self.items)
        del self.items[:start]
        self.first += start
        self.read = end
        return TurnItems(items=items, cursor=end)

    async def ask(self, call: ToolCallPart) -> bool:
        """Ask the client whether ``call`` may run (its answer comes by
        :meth:`answer`); no when no client is there to ask."""
        if self.client is None or not self.client.alive():
            return False  # nobody to ask: a tool that needs approval is not run
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.approvals[call.id] = future
        self.push(ApprovalAsked(call=call))
        try:
            return await future
        finally:
            self.approvals.pop(call.id, None)

    def answer(self, call_id: str, approved: bool) -> None:
        """The user's answer to the question about the tool call ``call_id``."""
        future = self.approvals.get(call_id)
        if future is not None and not future.done():
            future.set_result(approved)

    def refuse_questions(self) -> None:
        """The client left: every question waiting for it is answered no."""
        for future in self.approvals.values():
            if not future.done():
                future.set_result(False)

    def background(self) -> int:
        """How many of this conversation's tasks run besides its turn (closing it,
        its title, compression, turn-end saves)."""
        if self.closing is not None and not self.closing.done():
            return 1
        count = 0
        for conversation in self.coordinator.conversations.values():
            pending = [conversation.title, conversation.compression, *conversation.background]
            count += sum(1 for t in pending if t is not None and not t.done())
        return count


__all__ = ["KEEP_EVENTS", "Client", "Hosted"]
