"""A real HTTP server on 127.0.0.1 that speaks Ollama's wire format, for tests.

It runs in a thread of the test process (``ThreadingHTTPServer`` on port 0)
and answers what OLLM and the official ``ollama`` client use:

- ``POST /api/chat``: NDJSON stream (chunked, like Ollama) of ``{"model",
  "created_at", "message": {"role": "assistant", "content", "tool_calls"}, "done": false}``
  lines and a final ``done: true`` line with ``done_reason``, ``prompt_eval_count``,
  ``eval_count`` and the durations; or one JSON object when ``"stream": false``.
  A reply with ``thinking`` streams it first in ``message.thinking`` lines when the
  request asks ``"think": true`` (a thinking model asked not to think sends none);
  ``think: true`` for a model without the ``thinking`` capability is Ollama's 400.
- ``POST /api/show``: ``model_info`` with ``<family>.context_length``, ``details``,
  ``parameters`` (``num_ctx`` when the model sets one).
- ``GET /api/tags``, ``GET /api/version``, ``GET /`` ("Ollama is running").
- An unknown model is a 404 ``{"error": "model 'x' not found"}``, as Ollama says it.

Tests script the replies of ``/api/chat`` in order with :class:`Reply`: text in
chunks, tool calls, a delay before each chunk, a pause until the test releases
it, an HTTP error with Ollama's ``{"error": ...}`` body, an error line in the
middle of the stream, or a connection dropped mid-stream. Without a script, a
chat is answered by :attr:`FakeOllama.default_reply` (an echo of the last user
message). Any route can be made to fail once with :meth:`FakeOllama.fail_next`
(an HTTP error) or :meth:`FakeOllama.drop_next` (the connection closed without
an answer), or held unanswered until the test releases it with
:meth:`FakeOllama.hold_next` (a call caught in flight: kill its caller then).
Every request received is recorded in :attr:`FakeOllama.requests`.

Example::

    with FakeOllama() as server:
        server.script(
            Reply.text("Hello there", chunks=2),
            Reply.tool_call("read_file", {"path": "notes.txt"}),
            Reply.dropped("Half an ans", after=1),
        )
        provider = OllamaProvider(OllamaSettings(host=server.url))
        ...
        assert server.chat_requests[0]["messages"][0]["role"] == "system"

As a pytest fixture::

    @pytest.fixture
    def ollama_server() -> Iterator[FakeOllama]:
        with FakeOllama() as server:
            yield server
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import orjson

OLLAMA_VERSION = "0.12.6"
_CREATED_AT = "2025-01-01T00:00:00.000000Z"
_HOLD_LIMIT_S = 120.0
"""The longest a held answer waits for its test before the connection is dropped (a
test that never releases must not hang the suite). Longer than the chat tests' 90 s
pexpect deadline: on a loaded machine a Ctrl-C through the service took over 30 s to
cancel, the held stream was dropped first, and the chat showed a broken stream."""


@dataclass
class FakeModel:
    """A model the fake server has "pulled".

    ``context_length=None`` makes ``/api/show`` leave ``<family>.context_length``
    out of ``model_info`` (a model Ollama does not describe); ``num_ctx`` adds a
    ``num_ctx`` line to ``parameters`` (a Modelfile that sets it). ``describe``
    is ``"full"``, ``"empty"`` (``model_info`` is ``{}``) or ``"absent"`` (no
    ``model_info`` key at all).
    """

    name: str = "llama3.2:latest"
    family: str = "llama"
    context_length: int | None = 131072
    num_ctx: int | None = None
    parameter_size: str = "3.2B"
    quantization_level: str = "Q4_K_M"
    capabilities: list[str] = field(default_factory=lambda: ["completion", "tools"])
    describe: str = "full"

    def details(self) -> dict[str, Any]:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": self.quantization_level,
        }


@dataclass
class Reply:
    """One scripted answer of ``/api/chat``.

    - ``chunks``: the text pieces, one NDJSON line each.
    - ``thinking``: reasoning pieces, sent first in ``message.thinking`` when asked for.
    - ``tool_calls``: ``{"name": ..., "arguments": {...}}`` sent in one line after the text.
    - ``delay``: seconds slept before each line (a slow stream).
    - ``hold`` / ``hold_after``: after ``hold_after`` lines, wait until the test
      sets ``hold`` (shows that chunks arrive before the answer is complete).
    - ``status`` / ``error``: answer with this HTTP status and ``{"error": error}``.
    - ``error_after``: after that many lines, send ``{"error": error}`` and end the stream.
    - ``drop_after``: after that many lines, close the connection without ending the stream.
    - ``final=False``: end the stream cleanly but without the final ``done`` line.
    - ``done_reason``, ``prompt_eval_count``, ``eval_count``: the final line's fields
      (counts are computed from the request and reply when left ``None``).
    """

    chunks: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0
    hold: threading.Event | None = None
    hold_after: int = 1
    status: int = 200
    error: str | None = None
    error_after: int | None = None
    drop_after: int | None = None
    done_reason: str = "stop"
    prompt_eval_count: int | None = None
    eval_count: int | None = None
    final: bool = True

    @classmethod
    def text(cls, text: str, *, chunks: int | None = None, **options: Any) -> Reply:
        """``text`` split into ``chunks`` pieces (default: one piece per word)."""
        return cls(chunks=split_text(text, chunks), **options)

    @classmethod
    def tool_call(
        cls, name: str, arguments: dict[str, Any] | None = None, *, text: str = "", **options: Any
    ) -> Reply:
        """A call of tool ``name`` (after ``text``, if any)."""
        return cls(
            chunks=split_text(text, None) if text else [],
            tool_calls=[{"name": name, "arguments": arguments or {}}],
            **options,
        )

    @classmethod
    def http_error(cls, status: int, message: str) -> Reply:
        """An HTTP error with Ollama's body ``{"error": message}``."""
        return cls(status=status, error=message)

    @classmethod
    def dropped(cls, text: str, *, after: int, chunks: int | None = None) -> Reply:
        """``text`` in chunks, the connection closed after ``after`` of them."""
        return cls(chunks=split_text(text, chunks), drop_after=after)

    @classmethod
    def stream_error(cls, text: str, message: str, *, after: int) -> Reply:
        """``text`` in chunks, then ``{"error": message}`` after ``after`` of them."""
        return cls(chunks=split_text(text, None), error=message, error_after=after)


def split_text(text: str, pieces: int | None) -> list[str]:
    """``text`` cut into ``pieces`` parts (default: at each word), joined back exactly."""
    if not text:
        return []
    if pieces is None:
        words = text.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class RecordedRequest:
    """A request the fake server received: method, path, JSON body (or ``None``), headers."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


def echo_reply(body: dict[str, Any]) -> Reply:
    """The default answer: ``You said: <last user message>``, one chunk per word."""
    last = ""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            last = str(message.get("content") or "")
    return Reply.text(f"You said: {last}")


class FakeOllama:
    """The fake Ollama server (see the module docstring). Use it as a context manager.

    ``url`` is its address (``http://127.0.0.1:PORT``), to use as ``provider.ollama.host``.
    """

    def __init__(
        self,
        models: list[FakeModel] | None = None,
        *,
        version: str = OLLAMA_VERSION,
    ) -> None:
        self.models: list[FakeModel] = models if models is not None else [FakeModel()]
        self.version = version
        self.requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []  # unexpected exceptions while serving
        self.default_reply: Callable[[dict[str, Any]], Reply] = echo_reply
        self._replies: deque[Reply] = deque()
        self._failures: dict[str, deque[tuple[int, str]]] = {}
        self._holds: dict[str, deque[threading.Event]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> FakeOllama:
        """Listen on 127.0.0.1 (a free port) and serve in a background thread."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-ollama",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; held or slow replies are cut short."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self._server is None:
            raise RuntimeError("FakeOllama is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- scripting ----------------------------------------------------------

    def script(self, *replies: Reply) -> FakeOllama:
        """Queue ``replies`` for the next ``/api/chat`` requests, in order."""
        with self._lock:
            self._replies.extend(replies)
        return self

    def fail_next(self, path: str, status: int, message: str) -> FakeOllama:
        """Answer the next request to ``path`` with HTTP ``status`` and ``{"error": message}``."""
        with self._lock:
            self._failures.setdefault(path, deque()).append((status, message))
        return self

    def drop_next(self, path: str) -> FakeOllama:
        """Close the connection of the next request to ``path`` without answering."""
        return self.fail_next(path, 0, "")

    def hold_next(self, path: str, release: threading.Event) -> FakeOllama:
        """Keep the next request to ``path`` unanswered until ``release`` is set (it is
        in :attr:`requests` from its arrival), then answer it as usual; a request
        released by nobody is dropped when the server stops."""
        with self._lock:
            self._holds.setdefault(path, deque()).append(release)
        return self

    def received(self, path: str) -> bool:
        """Whether a request to ``path`` arrived (one :meth:`hold_next` holds, say)."""
        with self._lock:
            return any(r.path == path for r in self.requests)

    def _take_hold(self, path: str) -> threading.Event | None:
        with self._lock:
            queued = self._holds.get(path)
            return queued.popleft() if queued else None

    def _take_failure(self, path: str) -> tuple[int, str] | None:
        with self._lock:
            queued = self._failures.get(path)
            return queued.popleft() if queued else None

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        with self._lock:
            return len(self._replies)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the ``/api/chat`` requests received, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.path == "/api/chat"]

    def find_model(self, name: str) -> FakeModel | None:
        """The model called ``name`` (``x`` means ``x:latest``, as in Ollama)."""
        wanted = name if ":" in name else f"{name}:latest"
        return next((m for m in self.models if m.name == wanted), None)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        return self.default_reply(body)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless stopping; ``False`` if the server is stopping."""
        return not self._stopping.wait(seconds) if seconds > 0 else not self._stopping.is_set()

    def _hold(self, event: threading.Event) -> bool:
        deadline = time.monotonic() + _HOLD_LIMIT_S
        while not event.wait(0.02):
            if self._stopping.is_set() or time.monotonic() > deadline:
                return False
        return True


class _Server(ThreadingHTTPServer):
    """The HTTP server: a thread per connection; clients hanging up are not errors."""

    daemon_threads = True
    fake: FakeOllama

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError) or error is None:
            return
        self.fake.errors.append(error)
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One connection to the fake server."""

    fake: FakeOllama
    protocol_version = "HTTP/1.1"
    server_version = "ollama-fake"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read :attr:`FakeOllama.requests` instead."""

    # -- plumbing -----------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw.decode("utf-8", errors="replace")

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": message})

    def _record(self, body: Any) -> None:
        self.fake._record(
            RecordedRequest(
                method=self.command,
                path=self.path,
                body=body,
                headers={k.lower(): v for k, v in self.headers.items()},
            )
        )

    # -- routes -------------------------------------------------------------

    def _failed(self) -> bool:
        """Answer a failure queued with ``fail_next`` / ``drop_next``, if any (after
        a hold queued with ``hold_next``; a hold the test never releases drops)."""
        release = self.fake._take_hold(self.path)
        if release is not None and not self.fake._hold(release):
            self._drop()
            return True
        failure = self.fake._take_failure(self.path)
        if failure is None:
            return False
        status, message = failure
        if status == 0:
            self._drop()
        else:
            self._error(status, message)
        return True

    def do_HEAD(self) -> None:
        self._record(None)
        if self._failed():
            return
        if self.path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
        else:
            self._send(404, b"404 page not found", "text/plain")

    def do_GET(self) -> None:
        self._record(None)
        if self._failed():
            return
        if self.path == "/":
            self._send(200, b"Ollama is running", "text/plain; charset=utf-8")
        elif self.path == "/api/version":
            self._send(200, {"version": self.fake.version})
        elif self.path == "/api/tags":
            self._send(200, {"models": [self._tag(m) for m in self.fake.models]})
        else:
            self._send(404, b"404 page not found", "text/plain")

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        if self._failed():
            return
        if self.path not in ("/api/chat", "/api/show"):
            self._send(404, b"404 page not found", "text/plain")
            return
        if not isinstance(body, dict):
            self._error(400, "invalid request body: expected a JSON object")
            return
        name = body.get("model")
        if not isinstance(name, str) or not name:
            self._error(400, "model is required")
            return
        model = self.fake.find_model(name)
        if model is None:
            self._error(404, f"model '{name}' not found")
            return
        if self.path == "/api/show":
            self._send(200, self._show(model))
        elif body.get("think") and "thinking" not in model.capabilities:
            self._error(400, f'"{name}" does not support thinking')
        else:
            self._chat(name, body)

    @staticmethod
    def _tag(model: FakeModel) -> dict[str, Any]:
        return {
            "name": model.name,
            "model": model.name,
            "modified_at": _CREATED_AT,
            "size": 2019393189,
            "digest": hashlib.sha256(model.name.encode()).hexdigest(),
            "details": model.details(),
        }

    @staticmethod
    def _show(model: FakeModel) -> dict[str, Any]:
        info: dict[str, Any] = {
            "general.architecture": model.family,
            "general.parameter_count": 3212749888,
            f"{model.family}.embedding_length": 3072,
        }
        if model.context_length is not None:
            info[f"{model.family}.context_length"] = model.context_length
        parameters = ['stop "<|eot_id|>"']
        if model.num_ctx is not None:
            parameters.insert(0, f"num_ctx {model.num_ctx}")
        shown = {
            "license": "fake license",
            "modelfile": f"# Modelfile of {model.name}\nFROM {model.name}\n",
            "parameters": "\n".join(parameters),
            "template": "{{ .Prompt }}",
            "details": model.details(),
            "model_info": info if model.describe == "full" else {},
            "capabilities": model.capabilities,
            "modified_at": _CREATED_AT,
        }
        if model.describe == "absent":
            del shown["model_info"]
        return shown

    # -- /api/chat ----------------------------------------------------------

    def _chat(self, model: str, body: dict[str, Any]) -> None:
        reply = self.fake._next_reply(body)
        if reply.status != 200:
            self._error(reply.status, reply.error or "error")
            return
        thinking = reply.thinking if body.get("think") else []
        lines = [
            self._line(model, {"role": "assistant", "content": "", "thinking": t}) for t in thinking
        ]
        lines += [self._line(model, {"role": "assistant", "content": c}) for c in reply.chunks]
        if reply.tool_calls:
            calls = [
                {
                    "id": f"call_{index}",
                    "function": {
                        "index": index,
                        "name": call["name"],
                        "arguments": call.get("arguments", {}),
                    },
                }
                for index, call in enumerate(reply.tool_calls)
            ]
            lines.append(
                self._line(model, {"role": "assistant", "content": "", "tool_calls": calls})
            )
        final = self._final(model, body, reply)
        if body.get("stream") is False:
            message = {"role": "assistant", "content": "".join(reply.chunks)}
            if thinking:
                message["thinking"] = "".join(thinking)
            if reply.tool_calls:
                message["tool_calls"] = lines[-1]["message"]["tool_calls"]
            self._send(200, {**final, "message": message})
            return
        self._stream(reply, lines, final)

    @staticmethod
    def _line(model: str, message: dict[str, Any]) -> dict[str, Any]:
        return {"model": model, "created_at": _CREATED_AT, "message": message, "done": False}

    @staticmethod
    def _final(model: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prompt_words = sum(
            len(str(m.get("content") or "").split()) + 1
            for m in body.get("messages") or []
            if isinstance(m, dict)
        )
        answer_words = len("".join(reply.chunks).split()) + len(reply.tool_calls)
        if body.get("think"):
            answer_words += len("".join(reply.thinking).split())
        return {
            "model": model,
            "created_at": _CREATED_AT,
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": reply.done_reason,
            "total_duration": 1_250_000_000,
            "load_duration": 50_000_000,
            "prompt_eval_count": (
                reply.prompt_eval_count if reply.prompt_eval_count is not None else prompt_words
            ),
            "prompt_eval_duration": 200_000_000,
            "eval_count": reply.eval_count if reply.eval_count is not None else answer_words,
            "eval_duration": 1_000_000_000,
        }

    def _stream(self, reply: Reply, lines: list[dict[str, Any]], final: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        fake = self.fake
        try:
            for sent, line in enumerate(lines):
                if reply.drop_after is not None and sent >= reply.drop_after:
                    self._drop()
                    return
                if reply.error_after is not None and sent >= reply.error_after:
                    self._write_chunk({"error": reply.error or "error"})
                    self._end_chunks()
                    return
                if (
                    reply.hold is not None
                    and sent == reply.hold_after
                    and not fake._hold(reply.hold)
                ):
                    self._drop()
                    return
                if not fake._wait(reply.delay):
                    self._drop()
                    return
                self._write_chunk(line)
            if reply.drop_after is not None:
                self._drop()
                return
            if reply.error_after is not None:
                self._write_chunk({"error": reply.error or "error"})
            elif reply.final:
                self._write_chunk(final)
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _write_chunk(self, payload: dict[str, Any]) -> None:
        data = orjson.dumps(payload) + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection mid-stream, as a crashed server would."""
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


def fake_ollama() -> Iterator[FakeOllama]:
    """A running server for a pytest fixture: ``yield from fake_ollama()``."""
    with FakeOllama() as server:
        yield server
