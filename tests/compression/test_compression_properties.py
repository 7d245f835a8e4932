"""Properties 10 to 13 of spec 001 (Requirement 3), 100 examples each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ollm_cli.config.settings import CompressionSettings, SessionSettings
from ollm_cli.pipeline.compression import ActiveContext
from ollm_cli.pipeline.compression._service import (
    ChatCompressionService,
    CompressionResult,
    Strategy,
    apply_compression_to_metadata,
)
from ollm_cli.pipeline.compression._tokens import MESSAGE_OVERHEAD, TokenCounter
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._checkpoints import messages_digest
from ollm_cli.pipeline.records import CompressionEvent
from tests.compression.conversations import (
    SYSTEM_PROMPT,
    conversations,
    fake_summarizer,
    long_conversation,
    prose,
    recent_tail,
)

COUNTER = TokenCounter(persist=False)
STRATEGIES: tuple[Strategy, ...] = ("truncate", "summarize", "hybrid")


def service(**settings: object) -> ChatCompressionService:
    return ChatCompressionService(
        CompressionSettings.model_validate(settings), COUNTER, fake_summarizer
    )


@given(
    messages=conversations(max_exchanges=8),
    system_prompt=prose(0, 200),
    window=st.integers(256, 32_768),
    threshold=st.floats(0.05, 1.0),
    reserve=st.integers(0, 4096),
    checkpoint_tokens=st.integers(0, 3000),
    extra=st.integers(-2000, 2000),
)
def test_property_10_compression_trigger_threshold(
    messages: list,
    system_prompt: str,
    window: int,
    threshold: float,
    reserve: int,
    checkpoint_tokens: int,
    extra: int,
) -> None:
    """Compression is needed exactly when the messages exceed threshold x the
    available budget (window - reserve - system prompt - checkpoints)."""
    compressor = service(threshold=threshold, response_reserve=reserve)
    context = ActiveContext(system_prompt=system_prompt, messages=messages)
    tokens = sum(COUNTER.count_message(m) for m in messages)
    system_tokens = (MESSAGE_OVERHEAD + COUNTER.count_text(system_prompt)) if system_prompt else 0
    available = max(0, window - min(reserve, window // 4) - system_tokens)
    assert compressor.should_compress(context, window=window) == (
        tokens > int(available * threshold)
    )
    # The same decision from counts alone, around the trigger with checkpoints counted.
    limit = int(max(0, available - checkpoint_tokens) * threshold)
    probe = max(0, limit + extra)
    assert compressor.should_compress(
        probe,
        window=window,
        system_prompt_tokens=system_tokens,
        checkpoint_tokens=checkpoint_tokens,
    ) == (probe > limit)
    assert not service(enabled=False, threshold=threshold).should_compress(
        probe + 10**6, window=window
    )


def _compress(
    messages: list,
    *,
    strategy: Strategy,
    preserve_recent: int,
    window: int,
) -> tuple[ChatCompressionService, CompressionResult]:
    compressor = service(strategy=strategy, preserve_recent=preserve_recent)
    context = ActiveContext(system_prompt=SYSTEM_PROMPT, messages=messages)
    return compressor, compressor.compress(context, window=window)


@given(
    messages=conversations(min_exchanges=2, max_exchanges=14),
    strategy=st.sampled_from(STRATEGIES),
    recent_share=st.floats(0.0, 0.1),
    window=st.integers(4096, 16_384),
)
def test_property_11_compression_preserves_critical_messages(
    messages: list, strategy: Strategy, recent_share: float, window: int
) -> None:
    """The system prompt, the newest preserveRecent tokens of messages and every
    user message come out of any compression unchanged."""
    preserve_recent = int(window * recent_share)
    compressor, result = _compress(
        messages, strategy=strategy, preserve_recent=preserve_recent, window=window
    )
    budget = compressor.budget(window, MESSAGE_OVERHEAD + COUNTER.count_text(SYSTEM_PROMPT))
    assert preserve_recent <= budget.recent  # the setting is honoured, not capped
    compressed = result.context
    assert compressed.system_prompt == SYSTEM_PROMPT
    tail = recent_tail(COUNTER, messages, preserve_recent)
    assert compressed.messages[-len(tail) :] == tail
    users = [m for m in messages if m.role == "user"]
    assert [m for m in compressed.messages if m.role == "user"] == users
    assert not any("did not fit" in note for note in result.notes)


@given(
    messages=conversations(min_exchanges=3, max_exchanges=14),
    strategy=st.sampled_from(STRATEGIES),
    recent_share=st.floats(0.0, 0.1),
    window_share=st.floats(0.1, 0.95),
)
def test_property_12_compression_reduces_token_count(
    messages: list, strategy: Strategy, recent_share: float, window_share: float
) -> None:
    """A compression that is due leaves fewer tokens than it found, and still
    preserves the system prompt and the recent messages (unless even those and
    the user messages cannot fit the window, which the result then says)."""
    tokens = sum(COUNTER.count_message(m) for m in messages)
    window = window_passed_by(tokens, window_share)
    preserve_recent = int(window * recent_share)
    compressor = service(strategy=strategy, preserve_recent=preserve_recent)
    context = ActiveContext(system_prompt=SYSTEM_PROMPT, messages=messages)
    assume(compressor.should_compress(context, window=window))
    result = compressor.compress(context, window=window)
    assert result.compressed_tokens < result.original_tokens
    assert result.original_tokens == compressor._total(context)
    assert result.compressed_tokens == compressor._total(result.context)
    assert result.context.system_prompt == SYSTEM_PROMPT
    assert context.messages == messages  # the input (like the session file) is untouched
    tail = recent_tail(COUNTER, messages, preserve_recent)
    if any("more messages" in note for note in result.notes):
        kept = tail + [m for m in messages[: len(messages) - len(tail)] if m.role == "user"]
        budget = compressor.context_budget(context, window=window)
        assert COUNTER.count_messages(kept) > budget.room
    else:
        assert result.context.messages[-len(tail) :] == tail


def window_passed_by(tokens: int, share: float) -> int:
    """A window whose compression trigger is ``share`` of ``tokens``: the trigger is
    0.8 x (window - reserve - system prompt), the reserve at most a quarter of it."""
    system_tokens = MESSAGE_OVERHEAD + COUNTER.count_text(SYSTEM_PROMPT)
    room = int(tokens * share) / 0.8 + system_tokens
    small = int(room / 0.75)
    return small if small // 4 < 1024 else int(room + 1024)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChatRecordingService]:
    settings = SessionSettings(data_dir=tmp_path / "sessions", max_sessions=0, group_commit_ms=0)
    with ChatRecordingService(settings, snapshots_dir=tmp_path / "snapshots") as opened:
        yield opened


@given(
    messages=conversations(min_exchanges=3, max_exchanges=10),
    strategy=st.sampled_from(STRATEGIES),
    earlier=st.integers(0, 3),
    window=st.integers(1024, 4096),
)
def test_property_13_compression_count_increments(
    store: ChatRecordingService, messages: list, strategy: Strategy, earlier: int, window: int
) -> None:
    """Each compression recorded on a session raises compressionCount by exactly 1
    and appends its entry to compressionHistory; the messages stay as recorded."""
    sid = store.create_session("smollm2", "embedded")
    for message in messages:
        store.record_message(sid, message)
    for i in range(earlier):
        store.record_compression(
            sid, CompressionEvent(strategy="truncate", tokens_before=100 + i, tokens_after=50)
        )
    before = store.get_session(sid)
    assert before.metadata.compression_count == earlier

    _, result = _compress(messages, strategy=strategy, preserve_recent=64, window=window)
    store.record_compression(sid, result.event)
    after = store.get_session(sid)
    assert after.metadata.compression_count == earlier + 1
    # the store seals the checkpoint with a digest of the messages it covers
    event = result.event
    assert event.checkpoint is not None
    covered = [m.to_dict() for m in messages[: event.checkpoint.covers_through]]
    sealed = event.checkpoint.model_copy(update={"fingerprint": messages_digest(covered)})
    assert after.metadata.compression_history == [
        *before.metadata.compression_history,
        event.model_copy(update={"checkpoint": sealed}),
    ]
    assert after.messages == messages  # the session file is never compressed

    # The same through the metadata update function (for callers without a store).
    updated = apply_compression_to_metadata(before.metadata, result.event)
    assert updated.compression_count == earlier + 1
    assert updated.compression_history == [*before.metadata.compression_history, event]
    assert before.metadata.compression_count == earlier  # a new value, not a mutation
    store.close_session(sid)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_compression_result_event_matches_counts(strategy: Strategy) -> None:

    _, result = _compress(
        long_conversation(30), strategy=strategy, preserve_recent=256, window=4096
    )
    event = result.event
    assert (event.strategy, event.tokens_before, event.tokens_after) == (
        result.strategy,
        result.original_tokens,
        result.compressed_tokens,
    )
    assert event.tokens_after < event.tokens_before
