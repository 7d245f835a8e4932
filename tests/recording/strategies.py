"""Hypothesis strategies for session records (messages, parts, tool calls)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from ollm_cli.pipeline.records import (
    SessionMessage,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
)

MODELS = ("llama3.1:8b", "mistral:7b", "codellama:13b", "qwen2.5:0.5b")
PROVIDERS = ("ollama", "embedded", "simulated")

timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.isoformat().replace("+00:00", "Z"))

texts = st.text(max_size=80)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
json_leaves = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=4,
)
args = st.dictionaries(names, json_values, max_size=4)

parts = st.one_of(
    texts.map(lambda t: TextPart(text=t)),
    st.builds(ToolCallPart, id=names, name=names, args=args),
    st.builds(
        ToolResultPart, tool_call_id=names, name=names, content=texts, is_error=st.booleans()
    ),
)

messages = st.builds(
    SessionMessage,
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    parts=st.lists(parts, min_size=1, max_size=3),
    timestamp=timestamps,
)

tool_calls = st.builds(
    SessionToolCall,
    id=names,
    name=names,
    args=args,
    result=st.builds(
        ToolResult, llm_content=texts, return_display=st.none() | st.text(max_size=40)
    ),
    timestamp=timestamps,
    duration_ms=st.none() | st.floats(0, 1e6, allow_nan=False),
    success=st.none() | st.booleans(),
    error=st.none() | st.text(max_size=30),
)

records = st.lists(st.one_of(messages, tool_calls), max_size=8)
