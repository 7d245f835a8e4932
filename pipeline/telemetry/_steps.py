"""The coordinator's steps as spans: decorators that put a turn, a model call, a tool
and a compression each in its span (see ``pipeline/telemetry/_otel.py``) and record the
turn and model-call metrics. With telemetry off each costs one attribute check.

They read the coordinator's own arguments (the conversation, the tool call, the
turn's result) and never change what the step does or returns.

Example::

    class Coordinator:
        @traced_turn
        async def run_turn(self, session_id: str, text: str) -> TurnResult: ...
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, cast

from ollm_cli.pipeline.errors import ActorFailedError
from ollm_cli.pipeline.telemetry._otel import DISABLED, Telemetry

P = ParamSpec("P")
R = TypeVar("R")


def _telemetry(owner: Any) -> Telemetry:
    found = getattr(owner, "telemetry", DISABLED)
    return found if isinstance(found, Telemetry) else DISABLED


def traced_turn(
    step: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """``run_turn(session_id, text)``: the ``ollm.turn`` span and ``ollm.turn.duration``."""

    run: Callable[..., Coroutine[Any, Any, Any]] = step

    @functools.wraps(step)
    async def wrapper(self: Any, session_id: str, text: str, *args: Any, **kwargs: Any) -> R:
        telemetry = _telemetry(self)
        if not telemetry.enabled:
            return await run(self, session_id, text, *args, **kwargs)
        conversation = self.conversations.get(session_id)
        model = conversation.model if conversation is not None else ""
        attributes: dict[str, Any] = {
            "ollm.session.id": session_id,
            "gen_ai.conversation.id": session_id,
            "gen_ai.request.model": model,
        }
        if (shown := telemetry.prompt_text(text)) is not None:
            attributes["ollm.prompt"] = shown
        started = time.perf_counter()
        with telemetry.span("ollm.turn", attributes) as span:
            try:
                result: Any = await run(self, session_id, text, *args, **kwargs)
            except ActorFailedError:
                telemetry.measure("restarts", 1)
                raise
            span.set_attribute("ollm.turn.rounds", result.rounds)
            span.set_attribute("ollm.turn.tool_calls", result.tool_calls)
            span.set_attribute("gen_ai.usage.input_tokens", result.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.completion_tokens)
            if result.stopped:
                span.set_attribute("ollm.turn.stopped", result.stopped)
            if (answer := telemetry.prompt_text(result.answer)) is not None:
                span.set_attribute("ollm.answer", answer)
        telemetry.measure(
            "turn",
            time.perf_counter() - started,
            {"gen_ai.request.model": model, "ollm.stopped": result.stopped or "no"},
        )
        return result

    return cast(Callable[P, Coroutine[Any, Any, R]], wrapper)


def traced_model_round(
    step: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """``_model_round(conversation, additions, schemas, result, ...)``: a GenAI ``chat``
    span with the model and the tokens it used, and the model-call metrics."""

    run: Callable[..., Coroutine[Any, Any, Any]] = step

    @functools.wraps(step)
    async def wrapper(self: Any, conversation: Any, *args: Any, **kwargs: Any) -> R:
        telemetry = _telemetry(self)
        if not telemetry.enabled:
            return await run(self, conversation, *args, **kwargs)
        result = args[2] if len(args) > 2 else kwargs["result"]
        prompt_before, completion_before = result.prompt_tokens, result.completion_tokens
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": conversation.provider,
            "gen_ai.request.model": conversation.model,
            "gen_ai.conversation.id": conversation.session_id,
        }
        started = time.perf_counter()
        with telemetry.span(f"chat {conversation.model}", attributes) as span:
            answer: Any = await run(self, conversation, *args, **kwargs)
            used_in = result.prompt_tokens - prompt_before
            used_out = result.completion_tokens - completion_before
            span.set_attribute("gen_ai.response.model", conversation.model)
            span.set_attribute("gen_ai.usage.input_tokens", used_in)
            span.set_attribute("gen_ai.usage.output_tokens", used_out)
            text, calls = answer
            span.set_attribute(
                "gen_ai.response.finish_reasons", ["tool_calls" if calls else "stop"]
            )
            if (shown := telemetry.prompt_text(text)) is not None:
                span.set_attribute("gen_ai.output.messages", shown)
        metric = {"gen_ai.operation.name": "chat", "gen_ai.request.model": conversation.model}
        telemetry.measure("operation", time.perf_counter() - started, metric)
        telemetry.measure("tokens", used_in, metric | {"gen_ai.token.type": "input"})
        telemetry.measure("tokens", used_out, metric | {"gen_ai.token.type": "output"})
        return answer

    return cast(Callable[P, Coroutine[Any, Any, R]], wrapper)


def traced_tool(
    step: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """``_run_tool(conversation, call, result)``: an ``execute_tool <name>`` span."""

    run: Callable[..., Coroutine[Any, Any, Any]] = step

    @functools.wraps(step)
    async def wrapper(self: Any, conversation: Any, call: Any, *args: Any, **kwargs: Any) -> R:
        telemetry = _telemetry(self)
        if not telemetry.enabled:
            return await run(self, conversation, call, *args, **kwargs)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
        }
        with telemetry.span(f"execute_tool {call.name}", attributes):
            return await run(self, conversation, call, *args, **kwargs)

    return cast(Callable[P, Coroutine[Any, Any, R]], wrapper)


def traced_compression(
    step: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """``_compress(conversation, ...)``: an ``ollm.compression`` span."""

    run: Callable[..., Coroutine[Any, Any, Any]] = step

    @functools.wraps(step)
    async def wrapper(self: Any, conversation: Any, *args: Any, **kwargs: Any) -> R:
        telemetry = _telemetry(self)
        if not telemetry.enabled:
            return await run(self, conversation, *args, **kwargs)
        with telemetry.span("ollm.compression", {"ollm.session.id": conversation.session_id}):
            return await run(self, conversation, *args, **kwargs)

    return cast(Callable[P, Coroutine[Any, Any, R]], wrapper)
