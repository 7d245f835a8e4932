"""The provider service: one model provider serving the chats of many conversations.

A chat is polled, not pushed: :meth:`ProviderService.chat_begin` returns the
first batch of the answer, :meth:`~ProviderService.chat_next` each following
one, :meth:`~ProviderService.chat_cancel` stops it. Every call is one round
trip on Ray, and a fast model's whole answer fits in the first batch, so its
turn costs one call where a Ray streaming generator costs about two. The
messages of a conversation travel once (:class:`MessageCache`).

Example::

    service = ProviderService(settings.provider)
    batch = service.chat_begin(opening)
    while batch.more:
        batch = service.chat_next(opening.stream_id)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ollm_cli.config.settings import ProviderSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers._base import (
    ChatBatch,
    ChatOpening,
    ChatRequest,
    ModelInfo,
    Provider,
)
from ollm_cli.pipeline.providers._message_cache import MessageCache
from ollm_cli.pipeline.providers._stream import IDLE_STREAM_S, ChatStream

logger = logging.getLogger(__name__)


class ProviderService:
    """Serves chats of many conversations at once from one provider."""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        provider: Provider | None = None,
        clock: Callable[[], float] = time.monotonic,
        idle_stream_s: float = IDLE_STREAM_S,
    ) -> None:
        """``provider``: use this one instead of creating it from ``settings``;
        ``clock`` and ``idle_stream_s``: when an unpolled stream is stopped."""
        self.settings = settings
        self.clock = clock
        self.idle_stream_s = idle_stream_s
        self._provider = provider
        self._lock = threading.Lock()
        self._streams: dict[str, ChatStream] = {}
        self._cancelled: dict[str, float] = {}
        self._messages = MessageCache()

    @property
    def provider(self) -> Provider:
        """The provider, created on first use (``auto`` probes Ollama then)."""
        with self._lock:
            if self._provider is None:
                # imported here: the providers' clients (openai, ollama) take about
                # 0.5 s to import, and a thin client of the service never needs them
                from ollm_cli.pipeline.providers._factory import create_provider

                self._provider = create_provider(self.settings)
            return self._provider

    def chat_begin(self, opening: ChatOpening) -> ChatBatch:
        """Start the answer to ``opening``'s request and return its first batch.

        Raises :class:`StaleContextError` when ``opening.base`` refers to
        messages this service does not hold (it was restarted): send them all.
        """
        request = self._messages.whole_request(opening)
        stream = ChatStream(self.provider.chat(request), self.clock)
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
                self._cancelled[stream_id] = self.clock()
        if stream is not None:
            stream.cancel()

    def forget(self, conversation: str) -> None:
        """Drop the messages kept for ``conversation`` (its session ended)."""
        self._messages.forget(conversation)

    def _batch(self, stream_id: str, stream: ChatStream) -> ChatBatch:
        try:
            batch = stream.next_batch()
        finally:
            if stream.finished:
                with self._lock:
                    self._streams.pop(stream_id, None)
        return batch

    def _sweep(self) -> None:
        """Stop streams nobody polls any more; forget old early cancels (lock held)."""
        now = self.clock()
        for stream_id, stream in list(self._streams.items()):
            if now - stream.touched > self.idle_stream_s and not stream.polled:
                logger.warning("stopping answer %s: nobody asked for it for a while", stream_id)
                stream.cancel()
                del self._streams[stream_id]
        for stream_id, when in list(self._cancelled.items()):
            if now - when > self.idle_stream_s:
                del self._cancelled[stream_id]

    def provider_name(self) -> str:
        return self.provider.name

    def complete(self, request: ChatRequest) -> str:
        return self.provider.complete(request)

    def model_info(self, model: str) -> ModelInfo:
        return self.provider.model_info(model)

    def default_model(self) -> str:
        return self.provider.default_model()

    def list_models(self) -> list[str]:
        return self.provider.list_models()

    def close(self) -> None:
        """Stop every stream and close the provider."""
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for stream in streams:
            stream.cancel()
        with self._lock:
            if self._provider is not None:
                self._provider.close()
                self._provider = None
