"""The Ollama provider, through Ollama's official Python client.

``/api/chat`` streams the answer (text and tool calls) and, on its last line,
the token counts Ollama measured; ``/api/show`` tells the model's real context
window and its capabilities. A model with the ``thinking`` capability (qwen3,
deepseek-r1, gpt-oss, ...) is asked ``think: true`` (``provider.thinking``, on
by default; off sends ``think: false``) and its reasoning, streamed in
``message.thinking``, is kept apart from the answer; reasoning inlined in
``<think>`` tags is split off too. A model Ollama does not describe gets
``provider.ollama.defaultContextWindow`` (4096), never an assumed large window.

Example::

    provider = OllamaProvider(OllamaSettings(host="http://127.0.0.1:11434"), model="llama3.2")
    provider.model_info("llama3.2").context_window      # e.g. 131072
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import ollama

from ollm_cli.config.settings import OllamaSettings
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
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    ToolCallPart,
)

logger = logging.getLogger(__name__)

_MAX_SERVER_MESSAGE = 300


def _image_data(part: ImagePart) -> str | None:
    """The base64 bytes of a local image, ``None`` for an image known only by URL."""
    if part.path is None:
        logger.warning("an image known only by URL is not sent to Ollama (it takes bytes)")
        return None
    try:
        data = Path(part.path).expanduser().read_bytes()
    except OSError as exc:
        raise ProviderError(
            f"cannot read image {part.path} attached to a message: {exc.strerror}",
            hint="check that the file still exists, or remove the image from the message",
        ) from None
    return base64.b64encode(data).decode("ascii")


def to_ollama_messages(request: ChatRequest) -> list[dict[str, Any]]:
    """The request's system prompt and messages in Ollama's ``/api/chat`` shape.

    The system prompt comes first; an assistant's tool calls become
    ``tool_calls``; each tool result becomes a ``tool`` message naming its tool;
    local images of user messages are sent as base64 ``images``.
    """
    return wire_messages(request, _convert)


def _convert(message: SessionMessage) -> list[dict[str, Any]]:
    text, calls, results = message_parts(message)
    images: list[str] = []
    if message.role == "user":
        for part in message.parts:
            if isinstance(part, ImagePart) and (data := _image_data(part)) is not None:
                images.append(data)
    out: list[dict[str, Any]] = []
    if text or calls or images or not results:
        entry: dict[str, Any] = {"role": message.role, "content": text}
        if calls:
            entry["tool_calls"] = [
                {"function": {"name": call.name, "arguments": call.args}} for call in calls
            ]
        if images:
            entry["images"] = images
        out.append(entry)
    for result in results:
        out.append({"role": "tool", "content": result.content, "tool_name": result.name})
    return out


def _parse_parameters(parameters: str | None) -> dict[str, str]:
    """Ollama's ``parameters`` text (``num_ctx 8192`` per line) as a mapping."""
    found: dict[str, str] = {}
    for line in (parameters or "").splitlines():
        key, _, value = line.strip().partition(" ")
        if key and value:
            found.setdefault(key, value.strip())
    return found


def _context_length(model_info: Mapping[str, Any] | None) -> int | None:
    if not model_info:
        return None
    architecture = model_info.get("general.architecture")
    keys = [f"{architecture}.context_length"] if isinstance(architecture, str) else []
    keys += sorted(k for k in model_info if k.endswith(".context_length"))
    for key in keys:
        value = model_info.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class OllamaProvider(Provider):
    """Chat with models served by Ollama (``provider.name: ollama``)."""

    name = "ollama"

    def __init__(
        self, settings: OllamaSettings, *, model: str | None = None, thinking: bool = True
    ) -> None:
        self.settings = settings
        self.configured_model = model
        self.thinking = thinking
        self._capabilities: dict[str, frozenset[str]] = {}
        self.host = display_host(settings.host)
        self._client = ollama.Client(host=settings.host, timeout=settings.timeout)
        self._info: dict[str, ModelInfo] = {}
        self._lock = threading.Lock()

    # -- errors -------------------------------------------------------------

    def _not_answering(self) -> ProviderError:
        return ProviderError(
            f"Ollama is not answering at {self.host}",
            hint="start it with `ollama serve` (or fix provider.ollama.host), or choose "
            "another provider with `--provider embedded`",
        )

    def _model_missing(self, model: str) -> ProviderError:
        return ProviderError(
            f"Ollama at {self.host} has no model {model!r}",
            hint=f"download it with `ollama pull {model}`, or pick one of `ollama list`",
        )

    def _refused(self, error: ollama.ResponseError, model: str, what: str) -> ProviderError:
        if error.status_code == 404 and "not found" in str(error.error).lower():
            return self._model_missing(model)
        message = str(error.error)[:_MAX_SERVER_MESSAGE]
        status = f" (HTTP {error.status_code})" if error.status_code > 0 else ""
        return ProviderError(
            f"Ollama at {self.host} refused {what}{status}: {message}",
            hint="check the Ollama server's log (`journalctl -u ollama` or the `ollama serve` "
            "terminal); retrying may help if it was busy",
        )

    # -- Provider -----------------------------------------------------------

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Stream ``/api/chat``; see :meth:`Provider.chat`."""
        messages = to_ollama_messages(request)
        options: dict[str, Any] = {}
        if request.num_ctx is not None:
            options["num_ctx"] = request.num_ctx
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if request.temperature is not None:
            options["temperature"] = request.temperature
        received = 0
        think = self._think(request)
        splitter = ThinkTagSplitter()
        try:
            stream = self._client.chat(
                model=request.model,
                messages=messages,
                tools=request.tools or None,
                stream=True,
                options=options or None,
                think=think,
            )
            for part in stream:
                received += 1
                chunk = self._chunk(part, splitter)
                if chunk.done_reason == TOKEN_LIMIT_REASON:
                    chunk.token_limit = request.max_tokens
                yield chunk
                if chunk.done:
                    return
        except ollama.ResponseError as error:
            if received == 0:
                raise self._refused(error, request.model, "the chat request") from None
            raise ProviderError(
                f"Ollama at {self.host} reported an error after {received} chunks: "
                f"{str(error.error)[:_MAX_SERVER_MESSAGE]}",
                hint="the answer so far was kept; ask again, or check the Ollama server's log",
            ) from None
        except (httpx.ConnectError, ConnectionError):
            raise self._not_answering() from None
        except httpx.TimeoutException:
            raise ProviderError(
                f"Ollama at {self.host} sent nothing for {self.settings.timeout:g}s "
                f"after {received} chunks",
                hint="the model may be loading or the machine overloaded; raise "
                "provider.ollama.timeout or try again",
            ) from None
        except (httpx.TransportError, ValueError) as error:
            logger.warning("ollama stream broke: %s", type(error).__name__)
            raise self._broken(received) from None
        raise self._broken(received)

    def _broken(self, received: int) -> ProviderError:
        return ProviderError(
            f"the stream from Ollama at {self.host} broke after {received} chunks",
            hint="the answer so far was kept; check that Ollama is still running and ask again",
        )

    def _think(self, request: ChatRequest) -> bool | None:
        """``think`` for the request: asked for models that can think, left out otherwise."""
        if request.think is not None:
            return request.think
        capabilities = self._capabilities.get(request.model)
        if capabilities is None:
            try:
                self.model_info(request.model)
            except ProviderError:  # the chat request reports what is wrong
                return None
            capabilities = self._capabilities.get(request.model, frozenset())
        return self.thinking if "thinking" in capabilities else None

    def _chunk(self, part: ollama.ChatResponse, splitter: ThinkTagSplitter) -> StreamChunk:
        message = part.message
        calls = [
            ToolCallPart(
                id=new_tool_call_id(),
                name=call.function.name,
                args=dict(call.function.arguments or {}),
            )
            for call in message.tool_calls or []
        ]
        done = bool(part.done)
        text, tagged = splitter.feed(message.content or "")
        if done:
            held_text, held_thinking = splitter.flush()
            text, tagged = text + held_text, tagged + held_thinking
        return StreamChunk(
            text=text,
            thinking=(message.thinking or "") + tagged,
            tool_calls=calls,
            done=done,
            done_reason=part.done_reason if done else None,
            prompt_tokens=part.prompt_eval_count if done else None,
            completion_tokens=part.eval_count if done else None,
        )

    def model_info(self, model: str) -> ModelInfo:
        """The context window from ``/api/show``: the smaller of the model's and any
        ``num_ctx`` parameter, or the configured default when neither is shown."""
        with self._lock:
            cached = self._info.get(model)
        if cached is not None:
            return cached
        try:
            shown: ollama.ShowResponse | None = self._client.show(model)
        except ollama.ResponseError as error:
            raise self._refused(error, model, "to describe the model") from None
        except (httpx.ConnectError, ConnectionError):
            raise self._not_answering() from None
        except httpx.TransportError:
            raise ProviderError(
                f"Ollama at {self.host} did not describe model {model!r} (/api/show failed)",
                hint="check that Ollama is still running and try again",
            ) from None
        except ValueError:  # an answer the client cannot read describes nothing
            logger.warning("ollama: the description of model %s was not understood", model)
            shown = None
        candidates = []
        family = None
        if shown is not None:
            if (length := _context_length(shown.modelinfo)) is not None:
                candidates.append(length)
            num_ctx = _parse_parameters(shown.parameters).get("num_ctx", "")
            if num_ctx.isdigit() and int(num_ctx) > 0:
                candidates.append(int(num_ctx))
            family = shown.details.family if shown.details else None
            with self._lock:
                self._capabilities[model] = frozenset(shown.capabilities or ())
        if candidates:
            info = ModelInfo(
                name=model, context_window=min(candidates), context_source="server", family=family
            )
        else:
            logger.info(
                "ollama: model %s has no context length; using the default %d",
                model,
                self.settings.default_context_window,
            )
            info = ModelInfo(
                name=model,
                context_window=self.settings.default_context_window,
                context_source="default",
                family=family,
            )
        with self._lock:
            self._info[model] = info
        return info

    def list_models(self) -> list[str]:
        """The models Ollama has pulled (``/api/tags``)."""
        try:
            listed = self._client.list()
        except ollama.ResponseError as error:
            raise self._refused(error, "", "to list its models") from None
        except (httpx.ConnectError, ConnectionError):
            raise self._not_answering() from None
        except (httpx.TransportError, ValueError):
            raise ProviderError(
                f"Ollama at {self.host} did not list its models (/api/tags failed)",
                hint="check that Ollama is still running and try again",
            ) from None
        return [m.model for m in listed.models if m.model]

    def default_model(self) -> str:
        """The configured model, else the first model Ollama has."""
        if self.configured_model:
            return self.configured_model
        models = self.list_models()
        if not models:
            raise ProviderError(
                f"Ollama at {self.host} has no models",
                hint="download one with `ollama pull llama3.2` (or set provider.model)",
            )
        return models[0]

    def close(self) -> None:
        """Close the HTTP connections to Ollama."""
        self._client.close()


def ollama_answers(settings: OllamaSettings, timeout: float) -> bool:
    """Whether an Ollama server answers at ``settings.host`` within ``timeout`` seconds."""
    client = ollama.Client(host=settings.host, timeout=timeout)
    try:
        client.list()
    except Exception as error:  # any failure means "not usable"; the reason is logged
        logger.info(
            "ollama probe at %s failed: %s", display_host(settings.host), type(error).__name__
        )
        return False
    finally:
        client.close()
    return True
