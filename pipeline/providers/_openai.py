"""Any OpenAI-compatible chat-completions server, through the official ``openai`` client.

llama.cpp's ``llama-server``, LM Studio, vLLM, LocalAI, Jan and llamafile all
speak ``POST /v1/chat/completions``: the answer streams as server-sent events
whose ``delta`` carries text, reasoning (``reasoning_content`` or
``reasoning``; or ``<think>`` tags inside the text) and tool calls in pieces
(``tool_calls[i].function.arguments`` arrives a fragment at a time and is
joined here); with ``stream_options.include_usage`` the last event carries the
token counts. ``GET /v1/models`` lists the models. The context window is what
the server reports (vLLM's ``max_model_len``, llama-server's ``meta.n_ctx``
in its model list or ``n_ctx`` in ``/props``, LM Studio's
``max_context_length``), else ``provider.openai.contextWindow``, else
``provider.openai.defaultContextWindow``.

The key comes from the variable ``provider.openai.apiKeyEnv`` names
(``OPENAI_API_KEY`` by default) and goes out only as the bearer token: it is
never put in a message, an error, a log line or a record. A server that needs
no key gets a placeholder.

Example::

    provider = OpenAIProvider(OpenAISettings(baseUrl="http://127.0.0.1:8080/v1"))
    provider.list_models()                           # ["smollm2"]
    provider.model_info("smollm2").context_window    # e.g. 2048, from /props
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import orjson

from ollm_cli.config.settings import OpenAISettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers._base import (
    ChatRequest,
    ModelInfo,
    Provider,
    StreamChunk,
    display_host,
    message_parts,
    new_tool_call_id,
    wire_messages,
)
from ollm_cli.pipeline.providers._stop_reason import TOKEN_LIMIT_REASON
from ollm_cli.pipeline.providers._think_tags import ThinkTagSplitter
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart

logger = logging.getLogger(__name__)

NO_KEY = "no-key"
"""Sent when no key is set: the client needs one; servers without auth ignore it."""
_MAX_SERVER_MESSAGE = 300
_PROBE_TIMEOUT_S = 0.5


def display_url(url: str) -> str:
    """``url`` as it may be shown: scheme, host, port and path, never a user, password or query."""
    path = urlsplit(url if "://" in url else f"http://{url}").path
    return display_host(url) + path.rstrip("/")


def api_key(settings: OpenAISettings, env: Mapping[str, str] | None = None) -> str | None:
    """The key in the variable ``settings.api_key_env`` names, ``None`` when unset."""
    value = (os.environ if env is None else env).get(settings.api_key_env, "").strip()
    return value or None


def to_openai_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request in chat-completions shape: system prompt first, an assistant's tool
    calls as ``tool_calls`` (arguments as JSON text), each tool result as a ``tool``
    message with its ``tool_call_id``. Reasoning parts are never sent back."""
    return wire_messages(request, _convert)


def _convert(message: SessionMessage) -> list[dict[str, Any]]:
    text, calls, results = message_parts(message)
    out: list[dict[str, Any]] = []
    if text or calls or not results:
        entry: dict[str, Any] = {"role": message.role, "content": text}
        if calls:
            entry["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": orjson.dumps(call.args).decode()},
                }
                for call in calls
            ]
        out.append(entry)
    for result in results:
        out.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content})
    return out


class _ToolCallAssembly:
    """Tool calls arriving in ``delta.tool_calls`` fragments, joined by their ``index``."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, fragments: list[Any]) -> None:
        for fragment in fragments:
            call = self._calls.setdefault(
                int(getattr(fragment, "index", 0) or 0), {"id": None, "name": "", "args": []}
            )
            if getattr(fragment, "id", None):
                call["id"] = fragment.id
            function = getattr(fragment, "function", None)
            if function is not None:
                if getattr(function, "name", None):
                    call["name"] += function.name
                if getattr(function, "arguments", None):
                    call["args"].append(function.arguments)

    def complete(self) -> list[ToolCallPart]:
        parts = []
        for _, call in sorted(self._calls.items()):
            text = "".join(call["args"]).strip()
            try:
                args = orjson.loads(text) if text else {}
            except orjson.JSONDecodeError:
                args = {"_raw": text}
            if not isinstance(args, dict):
                args = {"_value": args}
            parts.append(
                ToolCallPart(id=call["id"] or new_tool_call_id(), name=call["name"], args=args)
            )
        return parts


def _window_of(entry: Mapping[str, Any]) -> int | None:
    """The context window a model listing reports, where it reports one."""
    meta = entry.get("meta")
    candidates = [
        entry.get("max_model_len"),  # vLLM
        entry.get("max_context_length"),  # LM Studio
        entry.get("context_length"),
        entry.get("loaded_context_length"),
        meta.get("n_ctx") if isinstance(meta, Mapping) else None,  # llama-server
    ]
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class OpenAIProvider(Provider):
    """Chat with an OpenAI-compatible server (``provider.name: openai``)."""

    name = "openai"

    def __init__(
        self,
        settings: OpenAISettings,
        *,
        model: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.configured_model = model
        self.url = display_url(settings.base_url)
        self._key = api_key(settings, env)
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=self._key or NO_KEY,
            timeout=settings.timeout,
            max_retries=0,
        )
        self._listing: dict[str, dict[str, Any]] | None = None
        self._info: dict[str, ModelInfo] = {}
        self._lock = threading.Lock()

    # -- errors -------------------------------------------------------------

    def _not_answering(self) -> ProviderError:
        return ProviderError(
            f"no OpenAI-compatible server is answering at {self.url}",
            hint="start it (e.g. `llama-server -m MODEL.gguf --port 8080`), or fix "
            "provider.openai.baseUrl / OPENAI_BASE_URL (it ends in /v1)",
        )

    def _refused_key(self) -> ProviderError:
        variable = self.settings.api_key_env
        state = "is set but was refused" if self._key else "is not set"
        return ProviderError(
            f"the server at {self.url} refused the request: the key in {variable} {state}",
            hint=f"export {variable} with the server's key (or set provider.openai.apiKeyEnv "
            "to the variable that holds it)",
        )

    def _model_missing(self, model: str, known: list[str]) -> ProviderError:
        listed = ", ".join(known[:8]) if known else "none"
        return ProviderError(
            f"the server at {self.url} has no model {model!r} (it lists: {listed})",
            hint="pick one of `ollm ... --model NAME` from that list, or load the model in "
            "the server",
        )

    def _status_error(self, error: openai.APIStatusError, model: str, what: str) -> ProviderError:
        if error.status_code in (401, 403):
            return self._refused_key()
        if error.status_code == 404:
            # listing the models is what failed when no model is named: asking
            # for the list again would send the same request without end
            known = self._known_models(quiet=True) if model else []
            if known and model and model not in known:
                return self._model_missing(model, known)
            return ProviderError(
                f"the server at {self.url} has no such endpoint or model (HTTP 404) for {what}",
                hint="check provider.openai.baseUrl: it must be the API root ending in /v1 "
                "(llama-server: http://127.0.0.1:8080/v1)",
            )
        message = _server_message(error)
        return ProviderError(
            f"the server at {self.url} refused {what} (HTTP {error.status_code}): {message}",
            hint="check the server's log; retrying may help if it was busy",
        )

    def _translate(self, error: Exception, model: str, what: str) -> ProviderError:
        if isinstance(error, openai.APITimeoutError):
            return ProviderError(
                f"the server at {self.url} sent nothing for {self.settings.timeout:g}s ({what})",
                hint="the model may be loading or the machine overloaded; raise "
                "provider.openai.timeout or try again",
            )
        if isinstance(error, openai.APIConnectionError):
            return self._not_answering()
        if isinstance(error, openai.APIStatusError):
            return self._status_error(error, model, what)
        logger.warning("openai-compatible server: %s failed: %s", what, type(error).__name__)
        return ProviderError(
            f"the answer of the server at {self.url} to {what} was not understood",
            hint="check that provider.openai.baseUrl points at an OpenAI-compatible API",
        )

    # -- Provider -----------------------------------------------------------

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Stream ``/v1/chat/completions``; see :meth:`Provider.chat`."""
        known = self._known_models(quiet=True)
        if known and request.model not in known:
            raise self._model_missing(request.model, known)
        arguments: dict[str, Any] = {
            "model": request.model,
            "messages": to_openai_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            arguments["tools"] = request.tools
            if request.tool_choice is not None:
                arguments["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            arguments["max_tokens"] = request.max_tokens
        if request.temperature is not None:
            arguments["temperature"] = request.temperature
        received = 0
        calls = _ToolCallAssembly()
        splitter = ThinkTagSplitter()
        finish: str | None = None
        usage: Any = None
        try:
            stream = self._client.chat.completions.create(**arguments)
            with stream:
                for event in stream:
                    received += 1
                    if getattr(event, "usage", None) is not None:
                        usage = event.usage
                    for choice in event.choices or []:
                        if choice.finish_reason:
                            finish = choice.finish_reason
                        delta = choice.delta
                        if delta is None:
                            continue
                        if delta.tool_calls:
                            calls.add(delta.tool_calls)
                        chunk = _text_chunk(delta, splitter)
                        if chunk is not None:
                            yield chunk
        except openai.APIStatusError as error:
            if received == 0:
                raise self._status_error(error, request.model, "the chat request") from None
            raise self._broken(received) from None
        except openai.APIError as error:
            if received == 0 or isinstance(error, openai.APITimeoutError):
                raise self._translate(error, request.model, "the chat request") from None
            raise self._broken(received) from None
        except (httpx.TransportError, ValueError) as error:
            logger.warning("openai-compatible stream broke: %s", type(error).__name__)
            raise self._broken(received) from None
        answer, thinking = splitter.flush()
        details = getattr(usage, "completion_tokens_details", None)
        yield StreamChunk(
            text=answer,
            thinking=thinking,
            tool_calls=calls.complete(),
            done=True,
            done_reason=finish or "stop",
            token_limit=request.max_tokens if finish == TOKEN_LIMIT_REASON else None,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            thinking_tokens=getattr(details, "reasoning_tokens", None),
        )

    def _broken(self, received: int) -> ProviderError:
        return ProviderError(
            f"the stream from the server at {self.url} broke after {received} events",
            hint="the answer so far was kept; check that the server is still running and ask again",
        )

    def _models(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._listing is not None:
                return self._listing
        try:
            page = self._client.models.list()
            listing = {m.id: m.model_dump() for m in page.data if m.id}
        except Exception as error:
            raise self._translate(error, "", "listing its models (/v1/models)") from None
        with self._lock:
            self._listing = listing
        return listing

    def _known_models(self, *, quiet: bool = False) -> list[str]:
        try:
            return list(self._models())
        except ProviderError:
            if quiet:
                return []
            raise

    def list_models(self) -> list[str]:
        """The models the server lists at ``/v1/models``."""
        return list(self._models())

    def default_model(self) -> str:
        """The configured model, else the first one the server lists."""
        if self.configured_model:
            return self.configured_model
        models = self.list_models()
        if not models:
            raise ProviderError(
                f"the server at {self.url} lists no models",
                hint="load a model in the server, or set provider.model",
            )
        return models[0]

    def model_info(self, model: str) -> ModelInfo:
        """The context window the server reports, else the configured one (see module)."""
        with self._lock:
            cached = self._info.get(model)
        if cached is not None:
            return cached
        listing = self._models()
        if listing and model not in listing:
            raise self._model_missing(model, list(listing))
        window = _window_of(listing.get(model, {})) or self._props_window()
        if window is not None:
            info = ModelInfo(name=model, context_window=window, context_source="server")
        elif self.settings.context_window is not None:
            info = ModelInfo(
                name=model, context_window=self.settings.context_window, context_source="config"
            )
        else:
            info = ModelInfo(
                name=model,
                context_window=self.settings.default_context_window,
                context_source="default",
            )
        with self._lock:
            self._info[model] = info
        return info

    def _props_window(self) -> int | None:
        """llama-server's ``/props`` (beside ``/v1``): the context its slots run with."""
        root = self.settings.base_url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            answer = httpx.get(f"{root}/props", headers=headers, timeout=self.settings.timeout)
            if answer.status_code != 200:
                return None
            props = answer.json()
        except (httpx.HTTPError, ValueError):
            return None
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None

    def close(self) -> None:
        """Close the HTTP connections to the server."""
        self._client.close()


def _text_chunk(delta: Any, splitter: ThinkTagSplitter) -> StreamChunk | None:
    """The answer and reasoning of one ``delta`` (reasoning fields, then ``<think>`` tags)."""
    extra = getattr(delta, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
    answer, tagged = splitter.feed(delta.content) if delta.content else ("", "")
    thinking = (reasoning if isinstance(reasoning, str) else "") + tagged
    if not answer and not thinking:
        return None
    return StreamChunk(text=answer, thinking=thinking)


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:_MAX_SERVER_MESSAGE]
    return str(error.message)[:_MAX_SERVER_MESSAGE]


def openai_server_answers(settings: OpenAISettings, timeout: float = _PROBE_TIMEOUT_S) -> bool:
    """Whether an OpenAI-compatible server answers ``/v1/models`` at ``settings.base_url``."""
    key = api_key(settings)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = settings.base_url.rstrip("/") + "/models"
    try:
        answer = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.HTTPError as error:
        logger.info(
            "openai probe at %s failed: %s", display_url(settings.base_url), type(error).__name__
        )
        return False
    return answer.status_code == 200
