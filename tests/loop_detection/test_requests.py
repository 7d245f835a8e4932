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
