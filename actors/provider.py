"""The model-provider actor: one provider (Ollama, embedded llama.cpp or simulated).

A chat is polled, not pushed: :meth:`ProviderShell.chat_begin` returns the
first batch of the answer, :meth:`~ProviderShell.chat_next` each following
one, :meth:`~ProviderShell.chat_cancel` stops it. Every call is one round
trip on Ray, and a fast model's whole answer fits in the first batch, so its
turn costs one call where a Ray streaming generator costs about two. The
messages of a conversation travel once: the shell keeps each conversation's
last request messages, and a new request sends only what follows them (see
:class:`~ollm_cli.pipeline.providers._base.ChatOpening`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator

from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.errors import ProviderError, StaleContextError
from ollm_cli.pipeline.providers._base import (
    ChatBatch,
    ChatOpening,
    ChatRequest,
    ModelInfo,
    Provider,
    StreamChunk,
)
from ollm_cli.pipeline.providers._factory import create_provider
from ollm_cli.pipeline.records import SessionMessage

logger = logging.getLogger(__name__)

COALESCE_S = 0.03
FIRST_COALESCE_S = 0.005
IDLE_STREAM_S = 600.0
"""A stream nobody polled for this long is stopped (its caller went away)."""
CONVERSATIONS_KEPT = 1024
"""The messages of at most this many conversations are kept (least recent go first)."""
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

    def __init__(self, chunks: Iterator[StreamChunk]) -> None:
        self._pending: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._first = True
        self.finished = False
        self.touched = time.monotonic()
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
            self.touched = time.monotonic()
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
            self.touched = time.monotonic()
            return ChatBatch(chunk=held, more=not self.finished)

    @property
    def polled(self) -> bool:
        """Whether a caller is waiting for a batch right now."""
        return self._lock.locked()

    def cancel(self) -> None:
        """Stop producing (the model stops after its next chunk) and end any wait."""
        self._stop.set()
        self._pending.put(_CANCEL)


class ProviderShell(ShellBase):
    """Serves chats of many conversations at once from one provider."""

    def __init__(self, settings: OllmSettings) -> None:
        self.settings = settings
        self._provider: Provider | None = None
        self._lock = threading.Lock()
        self._streams: dict[str, ChatStream] = {}
        self._cancelled: dict[str, float] = {}
        self._sent: OrderedDict[str, tuple[int, list[SessionMessage]]] = OrderedDict()

    @property
    def provider(self) -> Provider:
        """The provider, created on first use (``auto`` probes Ollama then)."""
        with self._lock:
            if self._provider is None:
                self._provider = create_provider(self.settings.provider)
            return self._provider

    def provider_name(self) -> str:
        return self.provider.name

    def chat_begin(self, opening: ChatOpening) -> ChatBatch:
        """Start the answer to ``opening``'s request and return its first batch.

        Raises :class:`StaleContextError` when ``opening.base`` refers to
        messages this shell does not hold (it was restarted): send them all.
        """
        request = self._whole_request(opening)
        stream = ChatStream(self.provider.chat(request))
        with self._lock:
            self._sweep()
            if self._cancelled.pop(opening.stream_id, None) is not None:
                stream.cancel()  # cancelled before it began
            self._streams[opening.stream_id] = stream
        return self._batch(opening.stream_id, stream)

    def chat_next(self, stream_id: str) -> ChatBatch:
        """The next batch of a stream :meth:`chat_begin` started."""
        with self._lock:
            stream = self._streams.get(stream_id)
        if stream is None:
            raise ProviderError(
                f"no answer {stream_id} is being streamed (it ended or was cancelled)",
                hint="send the message again",
            )
        return self._batch(stream_id, stream)

    def chat_cancel(self, stream_id: str) -> None:
        """Stop a stream (also one whose :meth:`chat_begin` has not arrived yet)."""
        with self._lock:
            stream = self._streams.pop(stream_id, None)
            if stream is None:
                self._cancelled[stream_id] = time.monotonic()
        if stream is not None:
            stream.cancel()

    def forget(self, conversation: str) -> None:
        """Drop the messages kept for ``conversation`` (its session ended)."""
        with self._lock:
            self._sent.pop(conversation, None)

    def _batch(self, stream_id: str, stream: ChatStream) -> ChatBatch:
        try:
            batch = stream.next_batch()
        finally:
            if stream.finished:
                with self._lock:
                    self._streams.pop(stream_id, None)
        return batch

    def _whole_request(self, opening: ChatOpening) -> ChatRequest:
        """The request with the conversation's kept messages before the new ones."""
        with self._lock:
            if opening.base == 0:
                messages = list(opening.request.messages)
            else:
                version, kept = self._sent.get(opening.conversation, (0, []))
                if version != opening.base_version or len(kept) < opening.base:
                    raise StaleContextError(
                        f"the provider does not hold the messages of {opening.conversation}",
                        hint="send the whole request",
                    )
                messages = kept[: opening.base] + opening.request.messages
            self._sent[opening.conversation] = (opening.version, messages)
            self._sent.move_to_end(opening.conversation)
            while len(self._sent) > CONVERSATIONS_KEPT:
                self._sent.popitem(last=False)
        return opening.request.model_copy(update={"messages": messages})

    def _sweep(self) -> None:
        """Stop streams nobody polls any more; forget old early cancels (lock held)."""
        now = time.monotonic()
        for stream_id, stream in list(self._streams.items()):
            if now - stream.touched > IDLE_STREAM_S and not stream.polled:
                logger.warning("stopping answer %s: nobody asked for it for a while", stream_id)
                stream.cancel()
                del self._streams[stream_id]
        for stream_id, when in list(self._cancelled.items()):
            if now - when > IDLE_STREAM_S:
                del self._cancelled[stream_id]

    def complete(self, request: ChatRequest) -> str:
        return self.provider.complete(request)

    def model_info(self, model: str) -> ModelInfo:
        return self.provider.model_info(model)

    def default_model(self) -> str:
        return self.provider.default_model()

    def list_models(self) -> list[str]:
        return self.provider.list_models()

    def close(self) -> None:
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for stream in streams:
            stream.cancel()
        with self._lock:
            if self._provider is not None:
                self._provider.close()
                self._provider = None
