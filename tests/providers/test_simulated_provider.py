"""The simulated provider: deterministic, cheap, honest about being a simulation."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import SimulatedSettings
from ollm_cli.pipeline.providers import ChatRequest, SimulatedProvider
from ollm_cli.pipeline.providers._simulated import example_arguments
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "grep",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "limit": {"type": "integer"},
                "ratio": {"type": "number"},
                "regex": {"type": "boolean"},
                "paths": {"type": "array"},
                "options": {"type": "object"},
                "mode": {"type": "string", "enum": ["fast", "full"]},
            },
            "required": ["pattern", "limit", "ratio", "regex", "paths", "options", "mode"],
        },
    },
}


def _provider(**settings: Any) -> SimulatedProvider:
    return SimulatedProvider(SimulatedSettings(**{"latency_ms": 0, **settings}))


def _request(text: str, **fields: Any) -> ChatRequest:
    return ChatRequest(model="simulated", messages=[SessionMessage.user(text)], **fields)


@given(st.text(max_size=200), st.integers(1, 64))
def test_output_is_deterministic_and_of_the_configured_length(text: str, words: int) -> None:
    provider = _provider(output_tokens=words)
    first = list(provider.chat(_request(text)))
    second = list(provider.chat(_request(text)))
    assert first == second
    final = first[-1]
    assert final.done and final.done_reason == "stop"
    assert final.completion_tokens == words
    assert len("".join(c.text for c in first).split(" ")) == words
    assert all(not c.done for c in first[:-1])


def test_max_tokens_shortens_the_answer() -> None:
    chunks = list(_provider(output_tokens=32).chat(_request("hello", max_tokens=5)))
    assert len("".join(c.text for c in chunks).split()) == 5
    assert chunks[-1].done_reason == "length"


def test_words_come_from_the_user_message_and_a_fixed_vocabulary() -> None:
    text = _provider(output_tokens=200).complete(_request("zebra quantum"))
    assert {"zebra", "quantum"} & set(text.split())


def test_token_counts_estimate_the_prompt() -> None:
    request = ChatRequest(
        model="simulated",
        system_prompt="x" * 40,
        messages=[
            SessionMessage.user("y" * 80),
            SessionMessage(
                role="assistant", parts=[ToolCallPart(id="1", name="read_file", args={})]
            ),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="1", name="read_file", content="z" * 40)],
            ),
        ],
    )
    final = list(_provider().chat(request))[-1]
    assert final.prompt_tokens == 10 + 20 + 3 + 10


def test_tool_call_every_nth_request_when_tools_are_offered() -> None:
    provider = _provider(tool_call_every=3)
    kinds = []
    for _ in range(6):
        chunks = list(
            provider.chat(_request("please look at src/app.py", tools=[SEARCH, READ_FILE]))
        )
        calls = [call for chunk in chunks for call in chunk.tool_calls]
        kinds.append(calls[0].name if calls else "text")
        if calls:
            assert calls[0].args == {"path": "src/app.py"}
            assert chunks[-1].done
    assert kinds == ["text", "text", "read_file", "text", "text", "read_file"]


def test_no_tool_call_without_tools_or_when_disabled() -> None:
    for provider, tools in ((_provider(tool_call_every=1), []), (_provider(), [READ_FILE])):
        chunks = list(provider.chat(_request("read a.txt", tools=tools)))
        assert not any(chunk.tool_calls for chunk in chunks)


def test_first_tool_with_schema_valid_arguments_when_no_path_is_mentioned() -> None:
    chunks = list(_provider(tool_call_every=1).chat(_request("find things", tools=[SEARCH])))
    call = chunks[0].tool_calls[0]
    assert call.name == "grep"
    assert call.args == {
        "pattern": "example",
        "limit": 1,
        "ratio": 1.0,
        "regex": True,
        "paths": [],
        "options": {},
        "mode": "fast",
    }


def test_example_arguments_without_required_takes_the_first_property() -> None:
    tool = {"name": "open", "parameters": {"properties": {"file": {}, "mode": {}}}}
    assert example_arguments(tool, "a/b.md") == {"file": "a/b.md"}
    assert example_arguments({"name": "noargs"}, None) == {}


def test_model_info_names_and_context_window() -> None:
    provider = _provider(context_window=16384)
    info = provider.model_info("simulated")
    assert (info.context_window, info.context_source) == (16384, "config")
    assert provider.name == "simulated"
    assert provider.list_models() == ["simulated"] == [provider.default_model()]
    provider.close()


def test_hundreds_of_concurrent_conversations() -> None:
    provider = _provider(latency_ms=5, output_tokens=16)
    results: list[str] = []
    lock = threading.Lock()

    def converse(number: int) -> None:
        text = provider.complete(_request(f"conversation {number}"))
        with lock:
            results.append(text)

    threads = [threading.Thread(target=converse, args=(n,)) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 200
    assert all(len(text.split()) == 16 for text in results)


def test_token_counts_include_the_tool_schemas() -> None:
    tool = {"type": "function", "function": {"name": "read_file", "parameters": {}}}
    bare = ChatRequest(model="simulated", messages=[SessionMessage.user("hi")])
    with_tools = bare.model_copy(update={"tools": [tool] * 10})
    base = list(_provider().chat(bare))[-1].prompt_tokens or 0
    more = list(_provider().chat(with_tools))[-1].prompt_tokens or 0
    assert more > base + 100
