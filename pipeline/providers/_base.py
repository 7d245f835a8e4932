"""What every model provider offers the coordinator: one request model, one
chunk model, one model-info model and the :class:`Provider` interface.

A provider turns a :class:`ChatRequest` (the active context as session
messages, plus the tools offered) into a synchronous stream of
:class:`StreamChunk`; the last chunk has ``done=True`` and carries the token
counts the model server reported. Errors are :class:`~ollm_cli.pipeline.errors.ProviderError`
whose message says what failed and what to do.

Example::

    provider = create_provider(settings.provider)
    request = ChatRequest(model=provider.default_model(), messages=[SessionMessage.user("Hi")])
    for chunk in provider.chat(request):
        print(chunk.text, end="")
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from ollm_cli.pipeline.records import SessionMessage, TextPart, ToolCallPart, ToolResultPart

WindowSource = Literal["server", "gguf", "config", "default"]
"""Where a model's context window size came from."""


class ChatRequest(BaseModel):
    """One call to the model: the active context and what the model may use."""

    model: str
    system_prompt: str = ""
    messages: list[SessionMessage] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Literal["auto", "required", "none"] | None = None
    """Whether the model must, may or must not call a tool (``None``: the server's
    default); the OpenAI-compatible provider sends it, others ignore it."""
    max_tokens: int | None = None
    temperature: float | None = None
    num_ctx: int | None = None
    think: bool | None = None
    """Ask a reasoning model for its reasoning (``None``: the server's default)."""


class StreamChunk(BaseModel):
    """A piece of the answer: text, complete tool calls, or the final marker.

    ``prompt_tokens`` and ``completion_tokens`` are the counts the model server
    reported; they are set on the final chunk (``done=True``) only.
    """

    text: str = ""
    thinking: str = ""
    """Reasoning of a thinking model, kept apart from ``text`` (the answer)."""
    tool_calls: list[ToolCallPart] = Field(default_factory=list)
    done: bool = False
    done_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    thinking_tokens: int | None = None
    """Of ``completion_tokens``, those the server says went to reasoning."""
    token_limit: int | None = None
    """On a final chunk with ``done_reason="length"``: the output limit the answer hit,
    when the provider knows it (``provider.embedded.maxTokens``, a request's
    ``max_tokens``); see :mod:`ollm_cli.pipeline.providers._stop_reason`."""


class ChatOpening(BaseModel):
    """How the coordinator opens a chat on the provider actor.

    A conversation's requests grow by a message or two a turn, so its messages
    travel once: the actor keeps the messages of the conversation's latest
    request (under ``conversation``, a key the coordinator makes unique, with
    that request's ``version``), and ``base`` says how many of the messages of
    version ``base_version`` begin this request; ``request.messages`` holds
    only the rest. ``base=0`` sends them all. ``stream_id`` names the answer's
    stream for :class:`ChatBatch` polling and cancelling.
    """

    request: ChatRequest
    conversation: str
    version: int = Field(ge=1)
    base: int = Field(default=0, ge=0)
    base_version: int = Field(default=0, ge=0)
    stream_id: str


class ChatBatch(BaseModel):
    """The next part of a streamed answer: what arrived since the last batch,
    joined into one chunk, and whether more is coming (``more=False``: the
    answer is complete)."""

    chunk: StreamChunk | None = None
    more: bool = False


class ModelInfo(BaseModel):
    """What we know of a model: its usable context window and where that number came from.

    ``context_source`` is ``server`` (Ollama's ``/api/show``), ``gguf`` (the
    model file's metadata), ``config`` (a configured cap or value) or
    ``default`` (nothing said; a conservative default, never a guess).
    """

    name: str
    context_window: int
    context_source: WindowSource
    family: str | None = None


WireMessage = dict[str, Any]
"""One message as a provider's protocol sends it (Ollama's and the OpenAI shape)."""


def wire_messages(
    request: ChatRequest, convert: Callable[[SessionMessage], list[WireMessage]]
) -> list[WireMessage]:
    """The request's messages on the wire: its system prompt first, then each message
    as ``convert`` turns it into one or more of the protocol's messages."""
    out: list[WireMessage] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    for message in request.messages:
        out.extend(convert(message))
    return out


def message_parts(
    message: SessionMessage,
) -> tuple[str, list[ToolCallPart], list[ToolResultPart]]:
    """What every protocol sends of a message: its text (parts joined by newlines),
    its tool calls and its tool results. Reasoning is never sent back."""
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    return text, calls, results


def new_tool_call_id() -> str:
    """A fresh identifier for a tool call the server gave no id to."""
    return f"call_{uuid.uuid4().hex[:16]}"


class Provider(ABC):
    """A source of model answers (Ollama, embedded llama.cpp, simulated)."""

    name: str

    @abstractmethod
    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Stream the answer to ``request``; the last chunk has ``done=True``.

        Raises :class:`~ollm_cli.pipeline.errors.ProviderError` when the model cannot
        answer; chunks already yielded stay valid (the caller keeps them).
        """

    def complete(self, request: ChatRequest) -> str:
        """The whole text of the answer (used for summaries and titles); reasoning
        is left out."""
        return "".join(chunk.text for chunk in self.chat(request))

    @abstractmethod
    def model_info(self, model: str) -> ModelInfo:
        """The context window of ``model`` and where it came from."""

    @abstractmethod
    def list_models(self) -> list[str]:
        """The names of the models this provider can run."""

    @abstractmethod
    def default_model(self) -> str:
        """The model to use when the configuration names none."""

    def close(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release connections or threads held by the provider."""

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def display_host(host: str) -> str:
    """``host`` as it may be shown: scheme, host and port, never a user, password or query."""
    parts = urlsplit(host if "://" in host else f"http://{host}")
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    name = parts.hostname or "?"
    if ":" in name:
        name = f"[{name}]"
    return f"{parts.scheme}://{name}{port}"
