"""The ``openai`` provider against llama.cpp's real HTTP server running SmolLM2
(see ``tests/providers/llama_server.py``): the model list, the context window,
streamed text and tool calls, token usage, ``auto``, and the errors for a wrong
URL, a missing model and a refused key, none of which shows the key."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.settings import OllamaSettings, OpenAISettings, ProviderSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers import ChatRequest, OpenAIProvider, create_provider
from ollm_cli.pipeline.providers._openai import to_openai_messages
from ollm_cli.pipeline.records import SessionMessage, ThinkingPart, ToolCallPart, ToolResultPart
from tests.providers.llama_server import CONTEXT, KEY, MODEL, LlamaServer

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with LlamaServer() as running:
        yield running


def provider_for(server: LlamaServer, key: str | None = KEY, **settings: object) -> OpenAIProvider:
    env = {"OPENAI_API_KEY": key} if key is not None else {}
    return OpenAIProvider(OpenAISettings(base_url=server.base_url, **settings), env=env)


def test_lists_the_model_and_reads_the_context_window_the_server_reports(
    server: LlamaServer,
) -> None:
    with provider_for(server, context_window=999) as provider:
        assert provider.list_models() == [MODEL]
        assert provider.default_model() == MODEL
        info = provider.model_info(MODEL)
    assert (info.context_window, info.context_source) == (CONTEXT, "server")


def test_streams_text_with_token_usage(server: LlamaServer) -> None:
    request = ChatRequest(
        model=MODEL,
        system_prompt="You are brief.",
        messages=[SessionMessage.user("Name a colour.")],
        max_tokens=12,
    )
    with provider_for(server) as provider:
        chunks = list(provider.chat(request))
    assert chunks[-1].done and all(not c.done for c in chunks[:-1])
    assert len(chunks) > 2  # streamed, not one block
    text = "".join(c.text for c in chunks)
    assert text.strip()
    final = chunks[-1]
    assert final.prompt_tokens and final.prompt_tokens > 5
    assert final.completion_tokens and 0 < final.completion_tokens <= 12
    assert final.done_reason in {"length", "stop"}


def _weather_examples(*cities: str) -> list[SessionMessage]:
    """Earlier turns in which the assistant called the tool (SmolLM2 follows examples)."""
    messages: list[SessionMessage] = []
    for number, city in enumerate(cities):
        call = ToolCallPart(id=f"c{number}", name="get_weather", args={"city": city})
        result = ToolResultPart(tool_call_id=call.id, name=call.name, content="sunny")
        messages += [
            SessionMessage.user(f"What is the weather in {city}?"),
            SessionMessage(role="assistant", parts=[call]),
            SessionMessage(role="tool", parts=[result]),
            SessionMessage.assistant("Sunny."),
        ]
    return messages


def test_streams_tool_calls_from_their_deltas(server: LlamaServer) -> None:
    """llama-server sends a call's arguments a fragment at a time; they arrive whole."""
    request = ChatRequest(
        model=MODEL,
        system_prompt="Always answer by calling a tool.",
        messages=[
            *_weather_examples("Rome", "Berlin"),
            SessionMessage.user("What is the weather in Paris?"),
        ],
        tools=[WEATHER_TOOL],
        tool_choice="required",
        max_tokens=40,
    )
    with provider_for(server) as provider:
        chunks = list(provider.chat(request))
    calls = [call for chunk in chunks for call in chunk.tool_calls]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert set(calls[0].args) == {"city"}
    assert calls[0].id  # the server's id
    assert chunks[-1].done_reason == "tool_calls"


def test_reasoning_is_never_sent_back_as_answer_text() -> None:
    answer = SessionMessage(
        role="assistant",
        parts=[ThinkingPart(text="secret plan"), *SessionMessage.assistant("Hi").parts],
    )
    sent = to_openai_messages(ChatRequest(model="m", messages=[answer]))
    assert sent == [{"role": "assistant", "content": "Hi"}]


def test_a_missing_model_is_named_with_the_ones_the_server_has(server: LlamaServer) -> None:
    request = ChatRequest(model="llama3.2", messages=[SessionMessage.user("hi")])
    with provider_for(server) as provider, pytest.raises(ProviderError) as caught:
        list(provider.chat(request))
    assert "no model 'llama3.2'" in caught.value.message
    assert MODEL in caught.value.message


@pytest.mark.parametrize("key", ["wrong-key-93b1", None])
def test_a_refused_key_names_the_variable_never_the_value(
    server: LlamaServer, key: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    request = ChatRequest(model=MODEL, messages=[SessionMessage.user("hi")])
    with provider_for(server, key=key) as provider, pytest.raises(ProviderError) as caught:
        list(provider.chat(request))
    shown = f"{caught.value.message} {caught.value.hint}"
    assert "OPENAI_API_KEY" in shown
    assert ("is set but was refused" if key else "is not set") in shown
    for secret in (KEY, "wrong-key-93b1"):
        assert secret not in shown
        assert secret not in caplog.text


def test_a_wrong_url_says_no_server_answers_there(refused_port: int) -> None:
    url = f"http://127.0.0.1:{refused_port}/v1"
    provider = OpenAIProvider(OpenAISettings(base_url=url), env={})
    with provider, pytest.raises(ProviderError) as caught:
        list(provider.chat(ChatRequest(model="m", messages=[SessionMessage.user("hi")])))
    assert f"no OpenAI-compatible server is answering at {url}" in caught.value.message


def test_a_url_without_v1_is_explained(server: LlamaServer) -> None:
    provider = OpenAIProvider(
        OpenAISettings(base_url=server.root + "/api"), env={"OPENAI_API_KEY": KEY}
    )
    with provider, pytest.raises(ProviderError) as caught:
        provider.list_models()
    assert "/v1" in (caught.value.hint or "")


def test_auto_picks_the_openai_server_when_ollama_is_not_answering(
    server: LlamaServer, refused_port: int
) -> None:
    settings = ProviderSettings(
        ollama=OllamaSettings(host=f"http://127.0.0.1:{refused_port}"),
        openai=OpenAISettings(base_url=server.base_url),
    )
    os.environ["OPENAI_API_KEY"] = KEY  # the probe reads the key the way the provider does
    try:
        provider = create_provider(settings, probe_timeout=10.0)
    finally:
        del os.environ["OPENAI_API_KEY"]
    assert isinstance(provider, OpenAIProvider)


def test_ollm_run_with_provider_openai_records_the_turn_without_the_key(
    server: LlamaServer, tmp_path: Path, ollm_home: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "OPENAI_"))} | {
        "OLLM_HOME": str(ollm_home),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": KEY,
        "OLLM_RUNTIME__KIND": "inprocess",
        "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
        "OLLM_SERVICES__COMPRESSION__ENABLED": "false",
        "NO_COLOR": "1",
    }
    run = subprocess.run(
        [*OLLM, "run", "--provider", "openai", "-p", "Say hello.", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr.decode()
    result = orjson.loads(run.stdout)
    assert result["answer"].strip()
    assert result["completion_tokens"] > 0
    files = list((ollm_home / "sessions").rglob("*.json"))
    assert files
    for path in ollm_home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    session = orjson.loads(max(files, key=lambda p: p.stat().st_size).read_bytes())
    assert session["provider"] == "openai"
    assert session["model"] == MODEL


def test_reasoning_fields_and_think_tags_of_a_delta_are_kept_apart() -> None:
    """vLLM and llama-server send ``reasoning_content``, LM Studio ``reasoning``; others
    inline ``<think>`` tags in the content."""
    from openai.types.chat.chat_completion_chunk import ChoiceDelta

    from ollm_cli.pipeline.providers._openai import _text_chunk
    from ollm_cli.pipeline.providers._think_tags import ThinkTagSplitter

    splitter = ThinkTagSplitter()
    first = _text_chunk(ChoiceDelta.model_validate({"reasoning_content": "Hm."}), splitter)
    second = _text_chunk(ChoiceDelta.model_validate({"reasoning": " Yes."}), splitter)
    third = _text_chunk(ChoiceDelta.model_validate({"content": "<think>so</think>Done."}), splitter)
    assert first is not None and (first.thinking, first.text) == ("Hm.", "")
    assert second is not None and second.thinking == " Yes."
    assert third is not None and (third.thinking, third.text) == ("so", "Done.")


def test_a_server_that_answers_404_everywhere_is_asked_once_per_listing() -> None:
    """A 404 while listing the models is reported, not answered by listing again:
    the provider once sent hundreds of ``/v1/models`` requests and hit the
    recursion limit."""
    import http.server
    import threading

    paths: list[str] = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            body = b'{"error": {"message": "not found"}}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        provider = OpenAIProvider(OpenAISettings(base_url=url), env={})
        with provider, pytest.raises(ProviderError) as caught:
            provider.list_models()
    finally:
        server.shutdown()
        server.server_close()
    assert "HTTP 404" in caught.value.message
    assert "/v1" in (caught.value.hint or "")
    assert paths == ["/v1/models"]
