"""The model-provider actor: one provider (Ollama, embedded llama.cpp or simulated)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from actors.shell import ShellBase
from config.settings import OllmSettings
from pipeline.providers.base import ChatRequest, ModelInfo, Provider, StreamChunk
from pipeline.providers.factory import create_provider

COALESCE_S = 0.03
FIRST_COALESCE_S = 0.005


def _join(first: StreamChunk, second: StreamChunk) -> StreamChunk:
    """One chunk holding both: text and tool calls in order, the later end fields."""
    return second.model_copy(
        update={
            "text": first.text + second.text,
            "tool_calls": [*first.tool_calls, *second.tool_calls],
        }
    )


class ProviderShell(ShellBase):
    """Serves chats of many conversations at once from one provider."""

    def __init__(self, settings: OllmSettings) -> None:
        self.settings = settings
        self._provider: Provider | None = None
        self._lock = threading.Lock()

    @property
    def provider(self) -> Provider:
        """The provider, created on first use (``auto`` probes Ollama then)."""
        with self._lock:
            if self._provider is None:
                self._provider = create_provider(self.settings.provider)
            return self._provider

    def provider_name(self) -> str:
        return self.provider.name

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Stream the answer, joining the chunks that arrive close together.

        Every yielded item is a round trip for the caller on Ray, and a fast
        model (or the simulated one) sends many tiny chunks. A chunk is held at
        most ``COALESCE_S`` for others to join it (the first one ``FIRST_COALESCE_S``),
        and the last goes at once.
        """
        pending: queue.SimpleQueue[StreamChunk | BaseException | None] = queue.SimpleQueue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for chunk in self.provider.chat(request):
                    pending.put(chunk)
                    if stop.is_set():
                        break
            except BaseException as error:  # handed to the consumer, raised there
                pending.put(error)
            pending.put(None)

        threading.Thread(target=produce, name="ollm-provider-stream", daemon=True).start()
        try:
            held: StreamChunk | None = None
            deadline = 0.0
            first = True
            while True:
                timeout = None if held is None else max(0.0, deadline - time.monotonic())
                try:
                    item = pending.get(timeout=timeout)
                except queue.Empty:
                    assert held is not None
                    yield held
                    held = None
                    continue
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                if held is None:
                    held, deadline = item, time.monotonic() + COALESCE_S
                else:
                    held = _join(held, item)
                if first and not item.done:
                    # the first words show almost at once; what follows within a few
                    # milliseconds (a fast model) joins them
                    first = False
                    deadline = time.monotonic() + FIRST_COALESCE_S
                    continue
                if item.done:
                    yield held
                    held = None
            if held is not None:
                yield held
        finally:
            stop.set()

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
            if self._provider is not None:
                self._provider.close()
                self._provider = None
