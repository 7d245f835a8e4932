"""A request's bounds on the detector: begin_request and finish_answer."""

from __future__ import annotations

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection import LoopDetectionService


def detector(max_turns: int) -> LoopDetectionService:
    return LoopDetectionService(LoopDetectionSettings.model_validate({"maxTurns": max_turns}))


def test_begin_request_counts_the_first_turn_of_a_fresh_request() -> None:
    service = detector(max_turns=2)
    assert service.begin_request() is None
    assert service.record_turn() is None
    event = service.record_turn()
    assert event is not None and event.action == "stop"
    assert service.begin_request() is None  # a new user message starts the count again


def test_an_answer_that_ends_the_request_begins_the_next_one() -> None:
    service = detector(max_turns=2)
    service.begin_request()
    service.record_turn()
    assert service.finish_answer("done", next_request=True) is None
    assert service.record_turn() is None  # the next request's second turn
    event = service.record_turn()
    assert event is not None and event.action == "stop"


def test_an_answer_checks_the_text_the_stream_check_has_not_seen() -> None:
    """The coordinator checks the stream in batches: the last one arrives only with the
    whole answer, and a model looping until its token limit loops there."""
    service = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    service.begin_request()
    head = "Here are the days:\n\n```\n["
    loop = head + "'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun', " * 5
    assert service.check_stream(head) is None
    event = service.finish_answer(loop, next_request=True)
    assert event is not None and event.kind == "stream-repetition" and event.action == "stop"


def test_an_answer_streamed_whole_is_not_checked_twice() -> None:
    service = LoopDetectionService(LoopDetectionSettings(on_detect="nudge"))
    service.begin_request()
    text = "The answer is forty two, as I said. " * 12
    first = service.check_stream(text)
    assert first is not None and first.action == "nudge"
    assert service.finish_answer(text) is None  # nothing unseen, one reply: no new event
