"""The fake Ollama server itself, spoken to over raw HTTP (no OLLM code involved)."""

from __future__ import annotations

import http.client
import threading
from typing import Any

import httpx
import orjson
import pytest

from tests.fake_ollama import FakeModel, FakeOllama, Reply, split_text


def _request(
    server: FakeOllama, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        data = orjson.dumps(body) if body is not None else None
        connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def test_root_version_and_tags(ollama_server: FakeOllama) -> None:
    status, _, data = _request(ollama_server, "GET", "/")
    assert (status, data) == (200, b"Ollama is running")
    status, _, data = _request(ollama_server, "HEAD", "/")
    assert status == 200
    status, _, data = _request(ollama_server, "GET", "/api/version")
    assert orjson.loads(data) == {"version": "0.12.6"}
    status, _, data = _request(ollama_server, "GET", "/api/tags")
    models = orjson.loads(data)["models"]
    assert [m["name"] for m in models] == ["llama3.2:latest"]
    assert models[0]["details"]["family"] == "llama"
    assert len(models[0]["digest"]) == 64
    assert _request(ollama_server, "GET", "/nope")[0] == 404
    assert _request(ollama_server, "HEAD", "/nope")[0] == 404
    assert _request(ollama_server, "POST", "/api/generate", {"model": "x"})[0] == 404
    assert [r.path for r in ollama_server.requests][:4] == ["/", "/", "/api/version", "/api/tags"]


def test_show_describes_context_length_and_num_ctx() -> None:
    models = [
        FakeModel(name="qwen:latest", family="qwen2", context_length=32768, num_ctx=8192),
        FakeModel(name="bare:7b", context_length=None),
    ]
    with FakeOllama(models) as server:
        _, _, data = _request(server, "POST", "/api/show", {"model": "qwen"})
        shown = orjson.loads(data)
        assert shown["model_info"]["qwen2.context_length"] == 32768
        assert shown["parameters"].splitlines()[0] == "num_ctx 8192"
        assert shown["details"]["family"] == "qwen2"
        _, _, data = _request(server, "POST", "/api/show", {"model": "bare:7b"})
        shown = orjson.loads(data)
        assert not any(k.endswith("context_length") for k in shown["model_info"])
        assert "num_ctx" not in shown["parameters"]


def test_unknown_model_and_bad_bodies_are_ollama_errors(ollama_server: FakeOllama) -> None:
    status, _, data = _request(ollama_server, "POST", "/api/chat", {"model": "ghost"})
    assert status == 404
    assert orjson.loads(data) == {"error": "model 'ghost' not found"}
    status, _, data = _request(ollama_server, "POST", "/api/show", {"model": "ghost:1b"})
    assert (status, orjson.loads(data)) == (404, {"error": "model 'ghost:1b' not found"})
    assert _request(ollama_server, "POST", "/api/chat", {"messages": []})[0] == 400
    assert _request(ollama_server, "POST", "/api/chat", [1, 2])[0] == 400
    assert ollama_server.requests[-1].body == [1, 2]


def test_chat_streams_ndjson_lines_and_a_final_line(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.text("Hello there friend", prompt_eval_count=7))
    status, headers, data = _request(
        ollama_server,
        "POST",
        "/api/chat",
        {"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert status == 200
    assert headers["Content-Type"] == "application/x-ndjson"
    lines = _lines(data)
    assert "".join(line["message"]["content"] for line in lines) == "Hello there friend"
    assert [line["done"] for line in lines] == [False, False, False, True]
    final = lines[-1]
    assert final["done_reason"] == "stop"
    assert final["prompt_eval_count"] == 7
    assert final["eval_count"] == 3
    assert final["model"] == "llama3.2"
    assert ollama_server.chat_requests[0]["messages"][0]["content"] == "hi"


def test_chat_without_stream_is_one_object_with_tool_calls(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.tool_call("read_file", {"path": "a.txt"}, text="Let me look"))
    _, _, data = _request(
        ollama_server, "POST", "/api/chat", {"model": "llama3.2", "stream": False, "messages": []}
    )
    answer = orjson.loads(data)
    assert answer["done"] is True
    assert answer["message"]["content"] == "Let me look"
    call = answer["message"]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"]) == ("read_file", {"path": "a.txt"})


def test_default_reply_echoes_the_last_user_message(ollama_server: FakeOllama) -> None:
    body = {
        "model": "llama3.2",
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second one"},
        ],
    }
    _, _, data = _request(ollama_server, "POST", "/api/chat", body)
    assert "".join(line["message"]["content"] for line in _lines(data)) == "You said: second one"


def test_scripted_http_error_and_error_line(ollama_server: FakeOllama) -> None:
    ollama_server.script(
        Reply.http_error(500, "llama runner process has terminated"),
        Reply.stream_error("one two three", "out of memory", after=2),
    )
    assert ollama_server.pending == 2
    body = {"model": "llama3.2", "messages": []}
    status, _, data = _request(ollama_server, "POST", "/api/chat", body)
    assert (status, orjson.loads(data)) == (500, {"error": "llama runner process has terminated"})
    _, _, data = _request(ollama_server, "POST", "/api/chat", body)
    lines = _lines(data)
    assert len(lines) == 3
    assert lines[-1] == {"error": "out of memory"}
    assert ollama_server.pending == 0


def test_dropped_connection_ends_without_the_final_chunk(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply.dropped("a b c d", after=2))
    host, port = ollama_server.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/api/chat", body=orjson.dumps({"model": "llama3.2"}))
    response = connection.getresponse()
    with pytest.raises(http.client.IncompleteRead) as caught:
        response.read()
    connection.close()
    assert len(_lines(caught.value.partial)) == 2


def test_held_reply_sends_first_chunks_before_the_rest(ollama_server: FakeOllama) -> None:
    release = threading.Event()
    ollama_server.script(Reply.text("early late", hold=release, hold_after=1))
    body = {"model": "llama3.2"}
    with httpx.stream("POST", f"{ollama_server.url}/api/chat", json=body, timeout=10) as response:
        lines = response.iter_lines()
        assert orjson.loads(next(lines))["message"]["content"] == "early"
        assert not release.is_set()  # the rest cannot have been sent yet
        release.set()
        rest = [orjson.loads(line) for line in lines]
    assert rest[0]["message"]["content"] == " late"
    assert rest[-1]["done"] is True


def test_stopping_cuts_a_held_reply_short() -> None:
    server = FakeOllama().start()
    server.script(Reply.text("early late", hold=threading.Event()))
    body = {"model": "llama3.2"}
    with httpx.stream("POST", f"{server.url}/api/chat", json=body, timeout=10) as response:
        lines = response.iter_lines()
        assert orjson.loads(next(lines))["message"]["content"] == "early"
        server.stop()
        with pytest.raises(httpx.RemoteProtocolError):
            list(lines)


def test_split_text_joins_back_exactly() -> None:
    assert split_text("", 3) == []
    assert split_text("a b  c", None) == ["a", " b", " ", " c"]
    assert "".join(split_text("abcdefg", 3)) == "abcdefg"
    assert len(split_text("abcdefg", 3)) == 3


def test_url_needs_a_running_server() -> None:
    server = FakeOllama()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url


def test_fail_next_and_drop_next_are_one_shot(ollama_server: FakeOllama) -> None:
    ollama_server.fail_next("/api/version", 503, "busy").drop_next("/")
    status, _, data = _request(ollama_server, "GET", "/api/version")
    assert (status, orjson.loads(data)) == (503, {"error": "busy"})
    assert _request(ollama_server, "GET", "/api/version")[0] == 200
    with pytest.raises(http.client.RemoteDisconnected):
        _request(ollama_server, "HEAD", "/")
    assert _request(ollama_server, "HEAD", "/")[0] == 200
    ollama_server.fail_next("/api/chat", 500, "no")
    assert _request(ollama_server, "POST", "/api/chat", {"model": "llama3.2"})[0] == 500


def test_reply_without_final_line_ends_the_stream_cleanly(ollama_server: FakeOllama) -> None:
    ollama_server.script(Reply(chunks=["x", "y"], final=False))
    status, _, data = _request(ollama_server, "POST", "/api/chat", {"model": "llama3.2"})
    assert status == 200
    assert [line["done"] for line in _lines(data)] == [False, False]


def test_show_can_describe_nothing() -> None:
    models = [FakeModel(name="a:1", describe="empty"), FakeModel(name="b:1", describe="absent")]
    with FakeOllama(models) as server:
        assert (
            orjson.loads(_request(server, "POST", "/api/show", {"model": "a:1"})[2])["model_info"]
            == {}
        )
        assert "model_info" not in orjson.loads(
            _request(server, "POST", "/api/show", {"model": "b:1"})[2]
        )
