"""Summaries written by the conversation's own model.

The compression actor asks the provider it creates on first use; the summary
is asked of the conversation's model with its window (:meth:`ModelSummarizer.use`),
so a server like Ollama does not reload the model for it. Each thread of the
actor summarizes for one conversation at a time, so the model and window are
kept per thread.

Example::

    summarize = ModelSummarizer(settings.provider)
    summarize.use("llama3.2", window=8192)
    text = summarize("Summarize: ...", 512)
"""

from __future__ import annotations

import threading

from ollm_cli.config.settings import ProviderSettings
from ollm_cli.pipeline.providers import ChatRequest, Provider
from ollm_cli.pipeline.records import SessionMessage


class ModelSummarizer:
    """A ``SummarizeFn`` (prompt, max tokens → text) backed by a model provider."""

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self._provider: Provider | None = None
        self._lock = threading.Lock()
        self._models = threading.local()

    def use(self, model: str, window: int) -> None:
        """Summaries asked from this thread go to ``model`` with ``window``."""
        self._models.current = model
        self._models.window = window

    def __call__(self, prompt: str, max_tokens: int) -> str:
        with self._lock:
            if self._provider is None:
                # imported here: the providers' clients take about 0.5 s to import
                from ollm_cli.pipeline.providers import create_provider

                self._provider = create_provider(self.settings)
            provider = self._provider
        model = getattr(self._models, "current", None) or provider.default_model()
        request = ChatRequest(
            model=model,
            messages=[SessionMessage.user(prompt)],
            max_tokens=max_tokens,
            temperature=0.2,
            num_ctx=getattr(self._models, "window", None),
        )
        return provider.complete(request)

    def close(self) -> None:
        """Close the provider, if one was made."""
        with self._lock:
            if self._provider is not None:
                self._provider.close()
                self._provider = None
