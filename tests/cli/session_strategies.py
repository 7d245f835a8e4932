"""Hypothesis strategies and builders for sessions, shared by the tests of this folder."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    SessionMetadata,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)

BASE_TIME = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)

texts = st.text(max_size=60)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)


def iso(offset_s: float) -> str:
    """``BASE_TIME`` plus ``offset_s`` seconds, as the records write it."""
    return (BASE_TIME + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_session(
    messages: list[SessionMessage] | None = None,
    tool_calls: list[SessionToolCall] | None = None,
    *,
    title: str | None = None,
    session_id: str | None = None,
    **metadata: Any,
) -> Session:
    """A session started at ``BASE_TIME`` with the given content."""
    return Session(
        session_id=session_id or str(uuid.uuid4()),
        start_time=iso(0),
        last_activity=iso(600),
        model="llama3.2:3b",
        provider="ollama",
        messages=messages or [],
        tool_calls=tool_calls or [],
        metadata=SessionMetadata(title=title, **metadata),
    )


@st.composite
def sessions(draw: st.DrawFn) -> Session:
    """Sessions with text messages, tool calls answered by tool messages, and metadata."""
    messages: list[SessionMessage] = []
    calls: list[SessionToolCall] = []
    clock = 0
    for index in range(draw(st.integers(0, 6))):
        clock += 1
        role = draw(st.sampled_from(["user", "assistant", "system"]))
        messages.append(
            SessionMessage(role=role, parts=[TextPart(text=draw(texts))], timestamp=iso(clock))
        )
        if role == "assistant" and draw(st.booleans()):
            call_id = f"call_{index}"
            name = draw(names)
            args = draw(st.dictionaries(names, json_values, max_size=3))
            result = draw(texts)
            messages[-1].parts.append(ToolCallPart(id=call_id, name=name, args=args))
            clock += 1
            messages.append(
                SessionMessage(
                    role="tool",
                    parts=[ToolResultPart(tool_call_id=call_id, name=name, content=result)],
                    timestamp=iso(clock),
                )
            )
            calls.append(
                SessionToolCall(
                    id=call_id,
                    name=name,
                    args=args,
                    result=ToolResult(llm_content=result, return_display=draw(st.none() | texts)),
                    timestamp=iso(clock),
                    duration_ms=draw(st.none() | st.floats(0, 1e4)),
                    success=draw(st.none() | st.booleans()),
                )
            )
    return make_session(
        messages,
        calls,
        title=draw(st.none() | texts),
        tags=draw(st.lists(names, max_size=3, unique=True)),
        notes=draw(st.none() | texts),
        pinned=draw(st.booleans()),
        token_count=draw(st.integers(0, 10**6)),
    )
