"""The simulated provider: a stand-in model for load and soak tests.

It is what its name says: no model runs. It answers in ``latency_ms`` (the time
to the first chunk) with ``output_tokens`` words chosen deterministically from
the last user message, and every ``tool_call_every``-th request that offers
tools it asks for a tool instead: ``read_file`` of a path the user mentioned if
that tool is offered, otherwise the first tool offered with arguments that
match its schema. It costs next to no CPU, so hundreds of conversations can run
at once. It is never chosen by ``provider: auto``.

Example::

    provider = SimulatedProvider(SimulatedSettings(latency_ms=0, output_tokens=8))
    provider.complete(ChatRequest(model="simulated", messages=[SessionMessage.user("hi")]))
"""

from __future__ import annotations

import itertools
import random
import re
import time
import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from ollm_cli.config.settings import SimulatedSettings
from ollm_cli.pipeline.providers._base import ChatRequest, ModelInfo, Provider, StreamChunk
from ollm_cli.pipeline.records import SessionMessage, TextPart, ToolCallPart, ToolResultPart

SIMULATED_MODEL = "simulated"
WORDS_PER_CHUNK = 4
_VOCABULARY = (
    *("the", "model", "considers", "your", "request", "and", "answers", "with"),
    *("simulated", "words", "that", "stand", "in", "for", "real", "output"),
    *("during", "load", "tests", "of", "sessions", "tools", "and", "compression"),
)
_PATH = re.compile(r"(?:[\w.-]+/)*[\w-]+\.[A-Za-z0-9]{1,8}\b")


def _message_text(message: SessionMessage) -> str:
    parts = []
    for part in message.parts:
        if isinstance(part, TextPart):
            parts.append(part.text)
        elif isinstance(part, ToolResultPart):
            parts.append(part.content)
        elif isinstance(part, ToolCallPart):
            parts.append(part.name)
    return "\n".join(parts)


def estimate_tokens(text: str) -> int:
    """A cheap token estimate: about four characters per token."""
    return (len(text) + 3) // 4


def _example_value(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(schema, dict) and schema.get("enum"):
        return schema["enum"][0]
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "example"


def example_arguments(tool: dict[str, Any], path: str | None) -> dict[str, Any]:
    """Arguments that satisfy the required properties of ``tool``'s parameter schema."""
    function = tool.get("function", tool)
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    args: dict[str, Any] = {}
    for name in parameters.get("required") or list(properties)[:1]:
        schema = properties.get(name, {})
        if path is not None and name in {"path", "file", "file_path", "filename"}:
            args[name] = path
        else:
            args[name] = _example_value(schema)
    return args


class SimulatedProvider(Provider):
    """Deterministic fake answers with configurable latency, length and tool calls."""

    name = "simulated"

    def __init__(self, settings: SimulatedSettings) -> None:
        self.settings = settings
        self._requests = itertools.count(1)  # next() is atomic under the GIL

    def chat(self, request: ChatRequest) -> Iterator[StreamChunk]:
        """Sleep ``latency_ms``, then stream the simulated answer."""
        number = next(self._requests)
        last_user = next(
            (_message_text(m) for m in reversed(request.messages) if m.role == "user"), ""
        )
        schemas = orjson.dumps(request.tools).decode() if request.tools else ""
        prompt_tokens = estimate_tokens(request.system_prompt + schemas) + sum(
            estimate_tokens(_message_text(m)) for m in request.messages
        )
        every = self.settings.tool_call_every
        if self.settings.latency_ms > 0:
            time.sleep(self.settings.latency_ms / 1000)
        if request.tools and every > 0 and number % every == 0:
            call = self._tool_call(request.tools, last_user, number)
            yield StreamChunk(tool_calls=[call])
            yield StreamChunk(
                done=True,
                done_reason="stop",
                prompt_tokens=prompt_tokens,
                completion_tokens=estimate_tokens(str(call.args)) + 1,
            )
            return
        words = self._words(last_user, request.max_tokens)
        for start in range(0, len(words), WORDS_PER_CHUNK):
            if start and self.settings.chunk_ms > 0:
                time.sleep(self.settings.chunk_ms / 1000)
            piece = " ".join(words[start : start + WORDS_PER_CHUNK])
            yield StreamChunk(text=piece if start == 0 else " " + piece)
        yield StreamChunk(
            done=True,
            done_reason="length" if len(words) < self.settings.output_tokens else "stop",
            token_limit=request.max_tokens if len(words) < self.settings.output_tokens else None,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(words),
        )

    def _words(self, last_user: str, max_tokens: int | None) -> list[str]:
        count = self.settings.output_tokens
        if max_tokens is not None:
            count = min(count, max_tokens)
        pool = [w for w in re.findall(r"\w+", last_user.lower())[:64]] + list(_VOCABULARY)
        rng = random.Random(zlib.crc32(last_user.encode("utf-8")))
        return [rng.choice(pool) for _ in range(count)]

    def _tool_call(self, tools: list[dict[str, Any]], last_user: str, number: int) -> ToolCallPart:
        match = _PATH.search(last_user)
        path = match.group(0) if match else None
        chosen = tools[0]
        for tool in tools:
            if path is not None and tool.get("function", tool).get("name") == "read_file":
                chosen = tool
                break
        name = str(chosen.get("function", chosen).get("name", "tool"))
        return ToolCallPart(
            id=f"call_sim_{number}", name=name, args=example_arguments(chosen, path)
        )

    def model_info(self, model: str) -> ModelInfo:
        """The configured ``contextWindow`` of the simulation."""
        return ModelInfo(
            name=model,
            context_window=self.settings.context_window,
            context_source="config",
            family=SIMULATED_MODEL,
        )

    def list_models(self) -> list[str]:
        """The one simulated model."""
        return [SIMULATED_MODEL]

    def default_model(self) -> str:
        """``simulated``."""
        return SIMULATED_MODEL
