"""Model providers: Ollama, embedded llama.cpp, simulated, and ``auto``.

Example::

    from ollm_cli.pipeline.providers import ChatRequest, create_provider

    provider = create_provider(settings.provider)
    text = provider.complete(ChatRequest(model=provider.default_model(), messages=messages))

The names below are imported when first used, so that a command that needs
none of them does not pay for their imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm_cli.pipeline._lazy import lazy_exports

if TYPE_CHECKING:
    from ollm_cli.pipeline.providers._base import (
        ChatBatch,
        ChatOpening,
        ChatRequest,
        ModelInfo,
        Provider,
        StreamChunk,
        WindowSource,
        display_host,
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
    from ollm_cli.pipeline.providers._ollama import OllamaProvider, ollama_answers
    from ollm_cli.pipeline.providers._openai import OpenAIProvider, display_url
    from ollm_cli.pipeline.providers._service import ProviderService
    from ollm_cli.pipeline.providers._simulated import SimulatedProvider
    from ollm_cli.pipeline.providers._stop_reason import (
        TOKEN_LIMIT_REASON,
        answer_end_fields,
        cut_at_token_limit,
        cut_note,
        recorded_token_limit,
        token_limit_note,
    )

__all__ = [
    "BUNDLED_SHA256",
    "PROBE_TIMEOUT_S",
    "TOKEN_LIMIT_REASON",
    "ChatBatch",
    "ChatOpening",
    "ChatRequest",
    "EmbeddedProvider",
    "GgufMetadata",
    "ModelInfo",
    "OllamaProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderService",
    "SimulatedProvider",
    "StreamChunk",
    "ToolCallTextParser",
    "WindowSource",
    "answer_end_fields",
    "bundled_model_path",
    "create_provider",
    "cut_at_token_limit",
    "cut_note",
    "display_host",
    "display_url",
    "embedded_model_available",
    "new_tool_call_id",
    "ollama_answers",
    "read_gguf_metadata",
    "recorded_token_limit",
    "token_limit_note",
    "verify_sha256",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "_base": (
            "ChatBatch",
            "ChatOpening",
            "ChatRequest",
            "ModelInfo",
            "Provider",
            "StreamChunk",
            "TOKEN_LIMIT_REASON",
            "WindowSource",
            "display_host",
            "new_tool_call_id",
        ),
        "_embedded": (
            "BUNDLED_SHA256",
            "EmbeddedProvider",
            "ToolCallTextParser",
            "answer_end_fields",
            "bundled_model_path",
            "embedded_model_available",
            "verify_sha256",
        ),
        "_factory": (
            "PROBE_TIMEOUT_S",
            "create_provider",
        ),
        "_gguf_metadata": (
            "GgufMetadata",
            "read_gguf_metadata",
        ),
        "_ollama": (
            "OllamaProvider",
            "ollama_answers",
        ),
        "_openai": ("OpenAIProvider", "display_url"),
        "_service": ("ProviderService",),
        "_simulated": ("SimulatedProvider",),
        "_stop_reason": (
            "TOKEN_LIMIT_REASON",
            "answer_end_fields",
            "cut_at_token_limit",
            "cut_note",
            "recorded_token_limit",
            "token_limit_note",
        ),
    },
)
