"""An answer produced on its own thread and handed out in coalesced batches.

A chat is polled, not pushed: every poll is one round trip for a caller on
Ray, and a fast model (or the simulated one) sends many tiny chunks, so a
:class:`ChatStream` holds each chunk a moment for others to join it.

Example::

    stream = ChatStream(provider.chat(request))
    batch = stream.next_batch()          # ChatBatch(chunk=..., more=True)
    while batch.more:
        batch = stream.next_batch()
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from ollm_cli.pipeline.providers._base import ChatBatch, StreamChunk

COALESCE_S = 0.03
FIRST_COALESCE_S = 0.005
IDLE_STREAM_S = 600.0
"""A stream nobody polled for this long is stopped (its caller went away)."""
_CANCEL = object()


def _join(first: StreamChunk, second: StreamChunk) -> StreamChunk:
    """One chunk holding both: text and tool calls in order, the later end fields."""
    return second.model_copy(
        update={
            "text": first.text + second.text,
            "thinking": first.thinking + second.thinking,
            "tool_calls": [*first.tool_calls, *second.tool_calls],
        }
    )


class ChatStream:
    """One answer being produced on its own thread, handed out in batches.

    Every batch is a round trip for the caller on Ray, and a fast model (or
    the simulated one) sends many tiny chunks. A chunk is held at most
    ``COALESCE_S`` for others to join it (the first one ``FIRST_COALESCE_S``,
    so the first words show almost at once), and the last goes at once.
    """

    def __init__(
        self, chunks: Iterator[StreamChunk], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._pending: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._first = True
        self.finished = False
        self.touched = self._clock()
        threading.Thread(
            target=self._produce, args=(chunks,), name="ollm-provider-stream", daemon=True
        ).start()

    def _produce(self, chunks: Iterator[StreamChunk]) -> None:
        try:
            for chunk in chunks:
                self._pending.put(chunk)
                if self._stop.is_set():
                    break
        except BaseException as error:  # handed to the consumer, raised there
            self._pending.put(error)
        self._pending.put(None)

    def next_batch(self) -> ChatBatch:
        """Wait for the next batch: what arrives until the coalescing deadline."""
        with self._lock:
            self.touched = self._clock()
            held: StreamChunk | None = None
            deadline = 0.0
            while not self.finished:
                timeout = None if held is None else max(0.0, deadline - time.monotonic())
                try:
                    item = self._pending.get(timeout=timeout)
                except queue.Empty:
                    break
                if item is None or item is _CANCEL:
                    self.finished = True
                    break
                if isinstance(item, BaseException):
                    self.finished = True
                    raise item
                assert isinstance(item, StreamChunk)
                if held is None:
                    held, deadline = item, time.monotonic() + COALESCE_S
                else:
                    held = _join(held, item)
                if item.done:
                    self.finished = True
                elif self._first:
                    self._first = False
                    deadline = time.monotonic() + FIRST_COALESCE_S
            self.touched = self._clock()
            return ChatBatch(chunk=held, more=not self.finished)

    @property
    def polled(self) -> bool:
        """Whether a caller is waiting for a batch right now."""
        return self._lock.locked()

    def cancel(self) -> None:
        """Stop producing (the model stops after its next chunk) and end any wait."""
        self._stop.set()
        self._pending.put(_CANCEL)
