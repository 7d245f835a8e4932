"""The model-provider actor: one provider (Ollama, embedded llama.cpp or simulated)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from actors.shell import ShellBase
from config.settings import OllmSettings
from pipeline.providers.base import ChatRequest, ModelInfo, Provider, StreamChunk
from pipeline.providers.factory import create_provider


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
        yield from self.provider.chat(request)

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
