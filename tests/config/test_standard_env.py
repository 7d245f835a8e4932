"""``OLLAMA_HOST``, ``OPENAI_BASE_URL`` and ``OTEL_EXPORTER_OTLP_ENDPOINT``: read as
their owners read them, used only when OLLM's own key is unset, and named by
``ollm config show`` when they win."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.loader import load_settings
from ollm_cli.config.standard_env import ollama_host_from_env
from ollm_cli.pipeline.providers import ChatRequest, create_provider
from ollm_cli.pipeline.records import SessionMessage
from tests.fake_ollama import FakeOllama, Reply

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("", "http://127.0.0.1:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:11500", "http://127.0.0.1:11500"),
        (":11500", "http://127.0.0.1:11500"),
        ("127.0.0.1:11500", "http://127.0.0.1:11500"),
        ("http://127.0.0.1:11500", "http://127.0.0.1:11500"),
        ("http://gpu.lan", "http://gpu.lan:80"),
        ("https://gpu.lan", "https://gpu.lan:443"),
        ("gpu.lan", "http://gpu.lan:11434"),
        ("'gpu.lan:9'", "http://gpu.lan:9"),
        ('  "http://gpu.lan:9"  ', "http://gpu.lan:9"),
        ("[::]:11500", "http://[::1]:11500"),
        ("::1", "http://[::1]:11434"),
        ("[fd00::5]", "http://[fd00::5]:11434"),
        ("gpu.lan:notaport", "http://gpu.lan:11434"),
        ("gpu.lan:99999", "http://gpu.lan:11434"),
        ("https://proxy.lan:8443/ollama", "https://proxy.lan:8443/ollama"),
        ("http://bob:S3cret@gpu.lan:9", "http://bob:S3cret@gpu.lan:9"),
        ("bob:S3cret@gpu.lan", "http://bob:S3cret@gpu.lan:11434"),
        ("https://bob@[fd00::5]/o", "https://bob@[fd00::5]:443/o"),
    ],
)
def test_ollama_host_is_read_as_ollama_reads_it(value: str, url: str) -> None:
    assert ollama_host_from_env(value) == url


@given(st.text(max_size=40))
def test_any_ollama_host_value_gives_a_url_with_a_port(value: str) -> None:
    url = ollama_host_from_env(value)
    assert "://" in url
    scheme = url.split("://", 1)[0]
    assert scheme  # the scheme given, else http
    rest = url.split("://", 1)[1].split("/", 1)[0]
    port = rest.rsplit(":", 1)[1]
    assert port.isdigit() and 0 <= int(port) <= 65535


def test_ollama_host_fills_the_key_only_when_unset(tmp_path: Path) -> None:
    env = {"OLLAMA_HOST": "0.0.0.0:11500"}
    loaded = load_settings(tmp_path, env)
    assert loaded.settings.provider.ollama.host == "http://127.0.0.1:11500"
    assert loaded.source_of("provider.ollama.host") == "env OLLAMA_HOST"

    ours = load_settings(tmp_path, {**env, "OLLM_OLLAMA_HOST": "http://127.0.0.1:9"})
    assert ours.settings.provider.ollama.host == "http://127.0.0.1:9"
    assert ours.source_of("provider.ollama.host") == "env OLLM_OLLAMA_HOST"

    # the user's own file (an untrusted workspace's sets no host at all: test_trust.py)
    user_file = tmp_path / "user-config.yaml"
    user_file.write_text("provider:\n  ollama:\n    host: http://127.0.0.1:7\n")
    filed = load_settings(tmp_path, env, user_file=user_file)
    assert filed.settings.provider.ollama.host == "http://127.0.0.1:7"
    assert filed.source_of("provider.ollama.host") == str(user_file)


def test_openai_base_url_and_otlp_endpoint_come_from_their_variables(tmp_path: Path) -> None:
    loaded = load_settings(
        tmp_path,
        {
            "OPENAI_BASE_URL": "http://127.0.0.1:1234/v1",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        },
    )
    assert loaded.settings.provider.openai.base_url == "http://127.0.0.1:1234/v1"
    assert loaded.source_of("provider.openai.baseUrl") == "env OPENAI_BASE_URL"
    assert loaded.settings.telemetry.otlp_endpoint == "http://127.0.0.1:4318"
    assert loaded.source_of("telemetry.otlpEndpoint") == "env OTEL_EXPORTER_OTLP_ENDPOINT"


def test_provider_follows_ollama_host_without_a_scheme(tmp_path: Path) -> None:
    """The fault of the issue: OLLAMA_HOST on another port was ignored (11434 was asked)."""
    with FakeOllama() as server:
        server.script(Reply.text("from the other port"))
        hostport = server.url.split("://", 1)[1]
        loaded = load_settings(tmp_path, {"OLLAMA_HOST": hostport, "OLLM_PROVIDER": "ollama"})
        with create_provider(loaded.settings.provider) as provider:
            request = ChatRequest(model="llama3.2:latest", messages=[SessionMessage.user("hi")])
            assert provider.complete(request) == "from the other port"
        assert len(server.chat_requests) == 1


def test_ollm_run_and_config_show_follow_ollama_host(tmp_path: Path, ollm_home: Path) -> None:
    with FakeOllama() as server:
        server.script(Reply.text("answer through OLLAMA_HOST"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "OLLAMA_"))} | {
            "OLLM_HOME": str(ollm_home),
            "OLLAMA_HOST": server.url,
            "OLLM_MODEL": "llama3.2:latest",
            "OLLM_RUNTIME__KIND": "inprocess",
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "NO_COLOR": "1",
        }
        run = subprocess.run(
            [*OLLM, "run", "--provider", "ollama", "-p", "hello"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        assert "answer through OLLAMA_HOST" in run.stdout
        shown = subprocess.run(
            [*OLLM, "config", "show", "--json"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            timeout=60,
        )
        url = server.url
    rows = {row["key"]: row for row in orjson.loads(shown.stdout)}
    assert rows["provider.ollama.host"]["source"] == "env OLLAMA_HOST"
    assert rows["provider.ollama.host"]["value"] == url
