"""The Ollama provider against a real HTTP server on 127.0.0.1 speaking Ollama's wire format."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import OllamaSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers import ChatRequest, OllamaProvider, StreamChunk, display_host
from ollm_cli.pipeline.providers._ollama import to_ollama_messages
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)
from tests.fake_ollama import FakeModel, FakeOllama, Reply

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def _provider(server: FakeOllama, **settings: object) -> OllamaProvider:
    return OllamaProvider(OllamaSettings(host=server.url, **settings))


def _request(text: str = "Hello", **fields: object) -> ChatRequest:
    return ChatRequest(model="llama3.2", messages=[SessionMessage.user(text)], **fields)


def test_chat_streams_text_then_a_final_chunk_with_token_counts(
    ollama_server: FakeOllama,
) -> None:
    ollama_server.script(Reply.text("Hello there, friend", prompt_eval_count=21, eval_count=5))
    chunks = list(_provider(ollama_server).chat(_request()))
    assert [c.text for c in chunks[:-1]] == ["Hello", " there,", " friend"]
    assert not any(c.done for c in chunks[:-1])
    final = chunks[-1]
    assert final.done and final.done_reason == "stop"
    assert (final.prompt_tokens, final.completion_tokens) == (21, 5)
    assert all(c.prompt_tokens is None for c in chunks[:-1])


def test_chat_returns_tool_calls_with_generated_ids(ollama_server: FakeOllama) -> None:
    ollama_server.script(
        Reply(
            chunks=["Reading"],
            tool_calls=[
                {"name": "read_file", "arguments": {"path": "a.txt"}},
                {"name": "read_file", "arguments": {"path": "b.txt"}},
            ],
        )
    )
    chunks = list(_provider(ollama_server).chat(_request(tools=TOOLS)))
    calls = [call for chunk in chunks for call in chunk.tool_calls]
    assert [(c.name, c.args) for c in calls] == [
        ("read_file", {"path": "a.txt"}),
        ("read_file", {"path": "b.txt"}),
    ]
    assert len({c.id for c in calls}) == 2
    assert all(c.id.startswith("call_") for c in calls)
    sent = ollama_server.chat_requests[0]
    assert sent["tools"][0]["function"]["name"] == "read_file"
    assert sent["stream"] is True


def test_request_conversion_system_tools_results_images(
    ollama_server: FakeOllama, tmp_path: Path
) -> None:
    image = tmp_path / "cat.png"
    image.write_bytes(b"\x89PNG fake image bytes")
    messages = [
        SessionMessage.system("Summary of earlier turns"),
        SessionMessage(
            role="user", parts=[TextPart(text="What is this?"), ImagePart(path=str(image))]
        ),
        SessionMessage(
            role="assistant",
            parts=[
                TextPart(text="Let me read it."),
                ToolCallPart(id="c1", name="read_file", args={"path": "a.txt"}),
            ],
        ),
        SessionMessage(
            role="tool",
            parts=[ToolResultPart(tool_call_id="c1", name="read_file", content="file body")],
        ),
        SessionMessage(role="user", parts=[TextPart(text="thanks"), UnknownPart(type="audio")]),
    ]
    request = ChatRequest(
        model="llama3.2",
        system_prompt="You are OLLM.",
        messages=messages,
        max_tokens=64,
        temperature=0.2,
        num_ctx=8192,
    )
    list(_provider(ollama_server).chat(request))
    sent = ollama_server.chat_requests[0]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "system", "user", "assistant", "tool", "user"]
    assert sent["messages"][0]["content"] == "You are OLLM."
    assert sent["messages"][2]["images"] == [base64.b64encode(image.read_bytes()).decode()]
    call = sent["messages"][3]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"]) == ("read_file", {"path": "a.txt"})
    assert sent["messages"][4] == {"role": "tool", "content": "file body", "tool_name": "read_file"}
    assert sent["options"] == {"num_ctx": 8192, "num_predict": 64, "temperature": 0.2}


def test_conversion_of_a_message_with_only_tool_results_and_url_images() -> None:
    request = ChatRequest(
        model="m",
        messages=[
            SessionMessage(
                role="tool",
                parts=[
                    ToolResultPart(tool_call_id="1", name="a", content="A"),
                    ToolResultPart(tool_call_id="2", name="b", content="B", is_error=True),
                ],
            ),
            SessionMessage(role="user", parts=[ImagePart(url="https://example.com/x.png")]),
        ],
    )
    converted = to_ollama_messages(request)
    assert converted == [
        {"role": "tool", "content": "A", "tool_name": "a"},
        {"role": "tool", "content": "B", "tool_name": "b"},
        {"role": "user", "content": ""},
    ]


def test_missing_image_is_a_clear_error(tmp_path: Path) -> None:
    gone = tmp_path / "gone.png"
    request = ChatRequest(
        model="m", messages=[SessionMessage(role="user", parts=[ImagePart(path=str(gone))])]
    )
    with pytest.raises(ProviderError, match=r"cannot read image .*gone\.png"):
        to_ollama_messages(request)


@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "system"]), st.text(max_size=40)),
        max_size=8,
    ),
    st.text(max_size=40),
)
def test_conversion_keeps_every_text_in_order(
    texts: list[tuple[str, str]], system_prompt: str
) -> None:
    messages = [SessionMessage.of_text(role, text) for role, text in texts]  # type: ignore[arg-type]
    converted = to_ollama_messages(
        ChatRequest(model="m", system_prompt=system_prompt, messages=messages)
    )
    expected = ([("system", system_prompt)] if system_prompt else []) + texts
    assert [(m["role"], m["content"]) for m in converted] == expected


def test_complete_joins_the_text(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.text("A short title", chunks=3))
    assert _provider(ollama_server).complete(_request()) == "A short title"


def test_model_info_reads_the_context_window_from_api_show() -> None:
    models = [
        FakeModel(name="big:latest", context_length=131072),
        FakeModel(name="capped:latest", context_length=32768, num_ctx=8192),
        FakeModel(name="small-ctx:latest", family="qwen2", context_length=2048, num_ctx=8192),
        FakeModel(name="mystery:latest", context_length=None),
        FakeModel(name="paramonly:latest", context_length=None, num_ctx=16384),
    ]
    with FakeOllama(models) as server:
        provider = _provider(server, default_context_window=4096)
        big = provider.model_info("big")
        assert (big.context_window, big.context_source, big.family) == (131072, "server", "llama")
        assert provider.model_info("capped").context_window == 8192
        small = provider.model_info("small-ctx")
        assert (small.context_window, small.family) == (2048, "qwen2")
        mystery = provider.model_info("mystery")
        assert (mystery.context_window, mystery.context_source) == (4096, "default")
        assert provider.model_info("paramonly").context_window == 16384
        shows = len([r for r in server.requests if r.path == "/api/show"])
        provider.model_info("big")
        assert len([r for r in server.requests if r.path == "/api/show"]) == shows  # cached


def test_unknown_model_says_ollama_pull(ollama_server: FakeOllama) -> None:
    provider = _provider(ollama_server)
    with pytest.raises(ProviderError) as caught:
        list(provider.chat(ChatRequest(model="ghost", messages=[SessionMessage.user("hi")])))
    assert "has no model 'ghost'" in caught.value.message
    assert caught.value.hint is not None and "ollama pull ghost" in caught.value.hint
    with pytest.raises(ProviderError, match="ollama pull ghost"):
        provider.model_info("ghost")


def test_http_error_is_reported_with_status_and_server_message(
    ollama_server: FakeOllama,
) -> None:
    ollama_server.script(Reply.http_error(500, "llama runner process has terminated"))
    with pytest.raises(ProviderError) as caught:
        list(_provider(ollama_server).chat(_request()))
    assert "HTTP 500" in caught.value.message
    assert "llama runner process has terminated" in caught.value.message


def test_error_line_mid_stream_keeps_the_chunks_already_given(
    ollama_server: FakeOllama,
) -> None:
    ollama_server.script(Reply.stream_error("one two three", "out of memory", after=2))
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        for chunk in _provider(ollama_server).chat(_request()):
            received.append(chunk)
    assert [c.text for c in received] == ["one", " two"]
    assert "after 2 chunks" in caught.value.message
    assert "out of memory" in caught.value.message


def test_error_line_before_any_chunk(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.stream_error("x", "model is loading", after=0))
    with pytest.raises(ProviderError, match="refused the chat request: model is loading"):
        list(_provider(ollama_server).chat(_request()))


def test_dropped_connection_says_after_how_many_chunks(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.dropped("a b c d e", after=3))
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        for chunk in _provider(ollama_server).chat(_request()):
            received.append(chunk)
    assert "".join(c.text for c in received) == "a b c"
    assert "broke after 3 chunks" in caught.value.message
    assert caught.value.hint is not None and "kept" in caught.value.hint


def test_dropped_before_the_final_line(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.dropped("a b", after=2))
    with pytest.raises(ProviderError, match="broke after 2 chunks"):
        list(_provider(ollama_server).chat(_request()))


def test_slow_stream_delivers_chunks_as_they_come(ollama_server: FakeOllama) -> None:
    release = threading.Event()
    ollama_server.script(Reply.text("first second third", hold=release, hold_after=1, delay=0.01))
    stream = _provider(ollama_server).chat(_request())
    first = next(stream)
    assert first.text == "first"
    assert not release.is_set()  # the server has not sent the rest yet
    release.set()
    rest = list(stream)
    assert "".join(c.text for c in rest) == " second third"
    assert rest[-1].done


def test_stream_that_stalls_past_the_timeout_is_an_error(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.text("one two", hold=threading.Event(), hold_after=1))
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        for chunk in _provider(ollama_server, timeout=1.0).chat(_request()):
            received.append(chunk)
    assert [c.text for c in received] == ["one"]
    assert "sent nothing for 1s after 1 chunks" in caught.value.message


def test_connection_refused_says_how_to_start_ollama(refused_port: int) -> None:
    port = refused_port
    provider = OllamaProvider(OllamaSettings(host=f"http://127.0.0.1:{port}"))
    for call in (
        lambda: list(provider.chat(_request())),
        lambda: provider.model_info("llama3.2"),
        provider.list_models,
    ):
        with pytest.raises(ProviderError) as caught:
            call()
        assert f"not answering at http://127.0.0.1:{port}" in caught.value.message
        assert caught.value.hint is not None
        assert "ollama serve" in caught.value.hint
        assert "--provider embedded" in caught.value.hint


def test_no_secret_of_the_host_url_reaches_a_message(refused_port: int) -> None:
    port = refused_port
    host = f"http://alice:s3cr3t-pass@127.0.0.1:{port}/?token=abc123"
    provider = OllamaProvider(OllamaSettings(host=host))
    with pytest.raises(ProviderError) as caught:
        list(provider.chat(_request()))
    shown = str(caught.value)
    assert "s3cr3t-pass" not in shown and "alice" not in shown and "abc123" not in shown


def test_display_host_forms() -> None:
    assert display_host("http://u:p@example.com:8080/x?q=1") == "http://example.com:8080"
    assert display_host("localhost:11434") == "http://localhost:11434"
    assert display_host("https://[::1]:9") == "https://[::1]:9"
    assert display_host("http://host:notaport") == "http://host"


def test_list_models_and_default_model() -> None:
    models = [FakeModel(name="qwen2.5:7b"), FakeModel(name="llama3.2:latest")]
    with FakeOllama(models) as server:
        provider = _provider(server)
        assert provider.list_models() == ["qwen2.5:7b", "llama3.2:latest"]
        assert provider.default_model() == "qwen2.5:7b"
        configured = OllamaProvider(OllamaSettings(host=server.url), model="llama3.2")
        assert configured.default_model() == "llama3.2"
    with FakeOllama([]) as server, pytest.raises(ProviderError, match="has no models"):
        _provider(server).default_model()


def test_provider_is_a_context_manager(ollama_server: FakeOllama) -> None:
    with _provider(ollama_server) as provider:
        assert provider.name == "ollama"
        assert provider.complete(_request("ping")) == "You said: ping"


def test_a_model_without_a_description_gets_the_default_window() -> None:
    models = [
        FakeModel(name="empty:latest", describe="empty"),
        FakeModel(name="absent:latest", describe="absent", num_ctx=8192),
    ]
    with FakeOllama(models) as server:
        provider = _provider(server, default_context_window=2048)
        empty = provider.model_info("empty")
        assert (empty.context_window, empty.context_source) == (2048, "default")
        assert empty.family == "llama"
        absent = provider.model_info("absent")  # the client cannot read it: described nothing
        assert (absent.context_window, absent.context_source, absent.family) == (
            2048,
            "default",
            None,
        )


def test_stream_that_ends_without_its_final_line(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply(chunks=["a", " b"], final=False))
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError, match="broke after 2 chunks"):
        for chunk in _provider(ollama_server).chat(_request()):
            received.append(chunk)
    assert [c.text for c in received] == ["a", " b"]


def test_failures_of_show_and_tags(ollama_server: FakeOllama) -> None:
    provider = _provider(ollama_server)
    ollama_server.fail_next("/api/tags", 503, "server busy")
    with pytest.raises(
        ProviderError, match=r"refused to list its models \(HTTP 503\): server busy"
    ):
        provider.list_models()
    ollama_server.drop_next("/api/tags")
    with pytest.raises(ProviderError, match="did not list its models"):
        provider.list_models()
    ollama_server.drop_next("/api/show")
    with pytest.raises(ProviderError, match=r"did not describe model 'llama3\.2'"):
        provider.model_info("llama3.2")
    ollama_server.fail_next("/api/show", 500, "boom")
    with pytest.raises(ProviderError, match=r"refused to describe the model \(HTTP 500\): boom"):
        provider.model_info("llama3.2")
    assert provider.list_models() == ["llama3.2:latest"]  # failures were one-shot
    assert provider.model_info("llama3.2").context_window == 131072
