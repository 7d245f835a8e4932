"""Model providers: Ollama, OpenAI-compatible servers, embedded llama.cpp, simulated,
and ``auto``.

Example::

    from ollm_cli.pipeline.providers import ChatRequest, create_provider

    provider = create_provider(settings.provider)
    text = provider.complete(ChatRequest(model=provider.default_model(), messages=messages))
"""

from __future__ import annotations

from ollm_cli.pipeline.providers._base import (
    ChatRequest,
    ContextSource,
    ModelInfo,
    Provider,
    StreamChunk,
    new_tool_call_id,
)
from ollm_cli.pipeline.providers._embedded import (
    BUNDLED_SHA256,
    EmbeddedProvider,
    ToolCallTextParser,
    bundled_model_path,
    embedded_model_available,
    verify_sha256,
)
from ollm_cli.pipeline.providers._factory import PROBE_TIMEOUT_S, create_provider
from ollm_cli.pipeline.providers._gguf_metadata import GgufMetadata, read_gguf_metadata
from ollm_cli.pipeline.providers._ollama import OllamaProvider, display_host, ollama_answers
from ollm_cli.pipeline.providers._simulated import SimulatedProvider
from ollm_cli.pipeline.providers.openai_compat import OpenAIProvider, openai_server_answers
from ollm_cli.pipeline.providers.think_tags import ThinkTagSplitter

__all__ = [
    "BUNDLED_SHA256",
    "PROBE_TIMEOUT_S",
    "ChatRequest",
    "ContextSource",
    "EmbeddedProvider",
    "GgufMetadata",
    "ModelInfo",
    "OllamaProvider",
    "OpenAIProvider",
    "Provider",
    "SimulatedProvider",
    "StreamChunk",
    "ThinkTagSplitter",
    "ToolCallTextParser",
    "bundled_model_path",
    "create_provider",
    "display_host",
    "embedded_model_available",
    "new_tool_call_id",
    "ollama_answers",
    "openai_server_answers",
    "read_gguf_metadata",
    "verify_sha256",
]
