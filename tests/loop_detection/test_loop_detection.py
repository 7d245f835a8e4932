"""LoopDetectionService: properties 14 to 17, and legitimate work that must not trigger."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection._service import (
    LIST_MIN_SPAN,
    STREAM_MIN_SPAN,
    LoopDetectionService,
    LoopEvent,
    canonical_call,
    similarity,
)

# not a tool that waits (sleep, wait...): its repeats are polls, nudged later on purpose
TOOL_NAME = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=12).filter(
    lambda n: re.fullmatch(r"sleep|wait|wait_for\w*|delay|pause", n) is None
)
JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=20))
ARGS = st.dictionaries(
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=8),
    st.one_of(JSON_SCALAR, st.lists(JSON_SCALAR, max_size=3)),
    max_size=5,
)
THRESHOLD = st.integers(min_value=2, max_value=6)
OUTPUT = st.text(min_size=1, max_size=200).filter(lambda t: t.strip() != "")


def detector(**settings: Any) -> LoopDetectionService:
    return LoopDetectionService(LoopDetectionSettings(**settings))


def _reordered(args: dict[str, Any], seed: int) -> dict[str, Any] | str:
    """The same arguments as another client would send them: keys shuffled, or as JSON text."""
    keys = list(args)
    if seed % 3 == 0:
        return json.dumps(args, indent=seed % 5 or None)
    rotation = seed % (len(keys) or 1)
    return {k: args[k] for k in keys[rotation:] + keys[:rotation]}


# -- property 14 ------------------------------------------------------------------------


@given(TOOL_NAME, ARGS, THRESHOLD, st.lists(st.integers(0, 100), min_size=6, max_size=6))
def test_property_14_repeated_tool_call_detection(
    name: str, args: dict[str, Any], threshold: int, seeds: list[int]
) -> None:
    """N identical calls in a row (canonically equal arguments) are a loop, N-1 are not."""
    loop = detector(repeat_threshold=threshold)
    loop.record_tool_call("warm_up", {"step": 1})
    events = [loop.record_tool_call(name, _reordered(args, seeds[i])) for i in range(threshold)]
    assert events[:-1] == [None] * (threshold - 1)
    event = events[-1]
    assert event is not None
    assert event.kind == "repeated-tool"
    assert event.count == threshold
    assert name in event.offending


# -- property 15 ------------------------------------------------------------------------


@given(OUTPUT, THRESHOLD)
def test_property_15_repeated_output_detection(text: str, threshold: int) -> None:
    """N identical outputs in a row are a loop, N-1 are not."""
    loop = detector(repeat_threshold=threshold)
    loop.record_output("A different opening reply.")
    events = [loop.record_output(text) for _ in range(threshold)]
    assert events[:-1] == [None] * (threshold - 1)
    event = events[-1]
    assert event is not None
    assert event.kind == "repeated-output"
    assert event.count == threshold


# -- property 16 ------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=1, max_value=5))
def test_property_16_turn_limit_detection(max_turns: int, extra: int) -> None:
    """Every turn beyond maxTurns is reported, and the turn limit always stops."""
    loop = detector(max_turns=max_turns, on_detect="nudge")
    assert all(loop.record_turn() is None for _ in range(max_turns))
    assert loop.turns == max_turns
    events = [loop.record_turn() for _ in range(extra)]
    assert all(e is not None and e.kind == "turn-limit" for e in events)
    first = events[0]
    assert first is not None
    assert first.action == "stop"
    assert first.count == max_turns + 1
    loop.record_user_message()
    assert loop.turns == 0
    assert loop.record_turn() is None


# -- property 17 ------------------------------------------------------------------------


def _trigger(loop: LoopDetectionService, kind: str, threshold: int) -> list[LoopEvent | None]:
    if kind == "repeated-tool":
        return [loop.record_tool_call("read_file", {"path": "a.py"}) for _ in range(threshold)]
    if kind == "tool-cycle":
        return [
            loop.record_tool_call(name, {"n": 1})
            for _ in range(threshold)
            for name in ("edit", "test")
        ]
    if kind == "repeated-output":
        return [loop.record_output("I will check the file again.") for _ in range(threshold)]
    text = "Sure. " + "I cannot do that, let me explain. " * 40
    return [loop.check_stream(text[i : i + 5]) for i in range(0, len(text), 5)]


@given(
    st.sampled_from(["repeated-tool", "tool-cycle", "repeated-output", "stream-repetition"]),
    st.integers(min_value=2, max_value=40),
    st.sampled_from(["nudge", "stop"]),
)
def test_property_17_loop_detection_stops_execution(
    kind: str, threshold: int, on_detect: str
) -> None:
    """A detected loop is reported with its pattern, then execution is stopped."""
    loop = detector(repeat_threshold=threshold, on_detect=on_detect)
    events = [e for e in _trigger(loop, kind, threshold) if e is not None]
    event = events[0]
    assert event.kind == kind
    assert event.details
    assert event.offending
    assert event.count >= (threshold if kind != "stream-repetition" else 4)
    assert loop.check_for_loop() == events[-1]
    if on_detect == "nudge":
        assert event.action == "nudge"
        instruction = loop.nudge_instruction()
        assert instruction is not None and "repeat" in instruction.lower()
        assert loop.nudge_instruction() is None
        assert loop.stopped is None
        loop.end_stream()
        events = [e for e in _trigger(loop, kind, threshold) if e is not None]
        event = events[0]
    assert event.action == "stop"
    assert loop.stopped == event
    # Nothing proceeds until the user speaks again.
    assert loop.record_tool_call("anything_else", {"x": 1}) == event
    assert loop.record_output("a brand new reply") == event
    assert loop.record_turn() == event
    assert loop.check_stream("more text") == event
    assert loop.check_for_loop() == event
    loop.record_user_message()
    assert loop.stopped is None
    assert loop.check_for_loop() is None
    assert loop.record_tool_call("anything_else", {"x": 1}) is None


# -- legitimate work must not trigger ----------------------------------------------------


def test_batch_renaming_twenty_files_is_not_a_loop() -> None:
    loop = detector()
    loop.record_user_message()
    for i in range(1, 21):
        assert loop.record_turn() is None
        assert loop.record_output(f"Renaming photo_{i:02}.jpg to holiday_{i:02}.jpg.") is None
        args = {"command": f"mv photo_{i:02}.jpg holiday_{i:02}.jpg"}
        assert loop.record_tool_call("shell", args) is None
        loop.record_tool_result("shell", args, "")
    assert loop.check_for_loop() is None


def test_polling_a_build_whose_status_changes_is_not_a_loop() -> None:
    loop = detector()
    for step in range(1, 16):
        assert loop.record_turn() is None
        assert loop.record_output("The build is still running; checking again.") is None
        assert loop.record_tool_call("build_status", {"id": "build-42"}) is None
        loop.record_tool_result("build_status", {"id": "build-42"}, f"running: step {step}/15")
    assert loop.check_for_loop() is None


def test_polling_with_an_unchanged_status_is_a_loop() -> None:
    """A status that says the work is still going makes it a poll: a higher threshold
    and a nudge before the stop, even with onDetect: stop (issue 16)."""
    loop = detector(on_detect="stop", poll_threshold=5)
    events = []
    for _ in range(10):
        events.append(loop.record_tool_call("build_status", {"id": "build-42"}))
        loop.record_tool_result("build_status", {"id": "build-42"}, "running: step 3/15")
    assert events[:4] == [None] * 4
    nudge = events[4]
    assert nudge is not None and nudge.kind == "repeated-tool" and nudge.action == "nudge"
    instruction = loop.nudge_instruction()
    assert instruction is not None and "wait longer" in instruction
    assert events[5:9] == [None] * 4
    stop = events[9]
    assert stop is not None and stop.action == "stop" and stop.count == 10


def test_repeating_a_call_whose_finished_result_does_not_change_is_a_loop() -> None:
    loop = detector(on_detect="stop")
    events = []
    for _ in range(3):
        events.append(loop.record_tool_call("run_tests", {"path": "tests/"}))
        loop.record_tool_result("run_tests", {"path": "tests/"}, "1 failed, 41 passed")
    assert events[-1] is not None and events[-1].kind == "repeated-tool"
    assert events[-1].action == "stop"


def test_tailing_a_growing_log_is_not_a_loop() -> None:
    loop = detector()
    log = ""
    for line in range(10):
        assert loop.record_tool_call("read_file", {"path": "build.log"}) is None
        log += f"line {line}\n"
        loop.record_tool_result("read_file", {"path": "build.log"}, log)


def test_reading_ten_different_files_is_not_a_loop() -> None:
    loop = detector()
    for i in range(10):
        assert loop.record_tool_call("read_file", {"path": f"src/module_{i}.py"}) is None
        loop.record_tool_result("read_file", {"path": f"src/module_{i}.py"}, f"# module {i}")


def test_edit_and_test_cycle_with_changing_results_is_not_a_loop() -> None:
    loop = detector()
    for attempt in range(6):
        assert loop.record_tool_call("edit_file", {"path": "a.py", "text": f"v{attempt}"}) is None
        loop.record_tool_result("edit_file", {"path": "a.py", "text": f"v{attempt}"}, "ok")
        assert loop.record_tool_call("run_tests", {}) is None
        loop.record_tool_result("run_tests", {}, f"{attempt} failed")


def test_same_cycle_with_changing_results_is_not_a_loop() -> None:
    loop = detector()
    for attempt in range(8):
        assert loop.record_tool_call("fetch", {"page": "status"}) is None
        loop.record_tool_result("fetch", {"page": "status"}, f"status {attempt}")
        assert loop.record_tool_call("sleep", {"seconds": 5}) is None
        loop.record_tool_result("sleep", {"seconds": 5}, "")


def test_numbered_list_streamed_is_not_a_loop() -> None:
    loop = detector()
    fruits = ["apples", "pears", "plums", "cherries", "figs", "grapes", "kiwis", "limes"]
    text = "Here is the list:\n" + "".join(
        f"{i}. {fruits[i % len(fruits)]}\n" for i in range(1, 120)
    )
    assert all(loop.check_stream(text[i : i + 3]) is None for i in range(0, len(text), 3))
    loop.end_stream()
    assert loop.record_output(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "| a | b |\n|---|---|\n" + "| 1 | 2 |\n" * 3,
        "=" * 400,
        "0, " * 200,
        "".join(f"row {i:03}: value {i * 7}\n" for i in range(60)),
        "[0., 0., 0., 0.],\n" * 10,
    ],
    ids=["small-table", "rule", "zeros", "numbered-rows", "short-matrix"],
)
def test_ordinary_repetitive_text_is_not_a_stream_loop(text: str) -> None:
    loop = detector()
    assert all(loop.check_stream(text[i : i + 7]) is None for i in range(0, len(text), 7))


def test_stream_repetition_is_found_incrementally_and_reported_once() -> None:
    loop = detector(on_detect="nudge")
    unit = "The answer is forty two, as I said. "
    text = "Let me think. " + unit * 30
    events = [loop.check_stream(text[i : i + 4]) for i in range(0, len(text), 4)]
    found = [e for e in events if e is not None]
    assert len(found) == 1
    event = found[0]
    assert event.kind == "stream-repetition"
    assert event.count >= 4
    assert sorted(event.offending) == sorted(unit)
    first = events.index(event)
    assert first * 4 < len("Let me think. ") + max(STREAM_MIN_SPAN, 4 * len(unit)) + len(unit)
    loop.end_stream()
    assert loop.check_stream("A fresh reply.") is None


def test_stream_repetition_without_spaces() -> None:
    loop = detector()
    text = "0123456789abcdef" * 40
    found = [e for e in (loop.check_stream(text[i : i + 9]) for i in range(0, len(text), 9)) if e]
    assert len(found) == 1
    assert sorted(found[0].offending) == sorted("0123456789abcdef")


def _first_event(text: str, chunk: int = 5) -> tuple[int, LoopEvent] | None:
    loop = detector()
    for start in range(0, len(text), chunk):
        event = loop.check_stream(text[start : start + chunk])
        if event is not None:
            return start + chunk, event
    return None


@pytest.mark.parametrize("fence", ["", "```python\n"])
def test_a_list_cycling_in_one_line_is_a_loop_in_a_fence_or_not(fence: str) -> None:
    """Three turns of a cycle of ten items, 210 characters: below the bar of a repeated
    sentence (4 times, 256 characters; 512 in a fence), a loop all the same."""
    cycle = "'Sun', 'Mon', 'Tue', 'Ton', 'Tue', 'Thu', 'Thi', 'Fri', 'Sat', 'Sun', "
    head = fence + "['Mon', 'Tue', 'Wed', "
    found = _first_event(head + cycle * 3 + "'Sun'")
    assert found is not None
    at, event = found
    assert event.kind == "stream-repetition" and event.count == 3
    # not before three turns (LIST_MIN_SPAN at least), at the latest once the third ends
    assert max(3 * len(cycle), LIST_MIN_SPAN) <= at <= len(head) + 3 * len(cycle) + 5
    assert _first_event(head + cycle * 2 + "'Sun'") is None  # twice is a list, not a loop


@pytest.mark.parametrize(
    "text",
    [
        # a sentence repeated in code is content (gemini-cli's rule), commas or not
        "```\n" + "This sentence, like that one, says nothing new at all. " * 9,
        # a cycle of two items is not a list going round
        "Pairs: " + "left hand, right hand, " * 10,
        # a cycle on two lines: each line alone does not repeat
        "Mon, Tue, Wed, Thu, Fri, Sat, Sun, Mon, Tue, Wed, Thu, Fri,\n"
        + "Sat, Sun, Mon, Tue, Wed, Thu, Fri, Sat, Sun, Mon, Tue, Wed,\n" * 3,
    ],
    ids=["sentence-in-code", "two-items", "wrapped-lines"],
)
def test_what_is_not_a_cycling_list(text: str) -> None:
    assert _first_event(text) is None


def test_stream_buffer_stays_bounded() -> None:
    loop = detector()
    for i in range(5000):
        loop.check_stream(f"token{i} ")
    assert len(loop._stream.state.buffer) < 4000


def test_near_identical_outputs_are_a_loop() -> None:
    loop = detector(on_detect="stop")
    assert loop.record_output("Let me try once more (attempt 1).") is None
    assert loop.record_output("Let me try once more (attempt 2).") is None
    event = loop.record_output("Let me try once more (attempt 3).")
    assert event is not None and event.kind == "repeated-output" and event.action == "stop"


def test_output_similarity_threshold_is_configurable() -> None:
    loop = detector(output_similarity=1.0)
    for attempt in range(5):
        assert loop.record_output(f"Let me try once more (attempt {attempt}).") is None


def test_empty_outputs_are_ignored() -> None:
    loop = detector()
    assert all(loop.record_output(" \n") is None for _ in range(5))


def test_similarity_measure() -> None:
    assert similarity("same", "same") == 1.0
    assert similarity("Renaming file 3 of 20.", "Renaming file 4 of 20.") > 0.9
    assert similarity("apples and pears", "a completely different sentence here") < 0.5
    long_a = " ".join(f"word{i}" for i in range(3000))
    long_b = long_a.replace("word10 ", "changed ").replace("word2000 ", "also ")
    assert similarity(long_a, long_b) > 0.9
    assert similarity("", "x") == 0.0


def test_arguments_compare_canonically() -> None:
    a = canonical_call("t", {"b": 1, "a": {"y": [1, 2], "x": None}})
    b = canonical_call("t", '{\n  "a": {"x": null, "y": [1, 2]},\n  "b": 1\n}')
    assert a == b
    assert canonical_call("t", {"s": "a  b"}) != canonical_call("t", {"s": "a b"})
    assert canonical_call("t", "not json  ") == canonical_call("t", "not json")
    assert canonical_call("t", None) == canonical_call("t", {}) == canonical_call("t", "")
    assert canonical_call("t", {"when": object}) == canonical_call("t", {"when": object})
    huge = {"b": 2**80, "a": 1}
    assert canonical_call("t", huge) == canonical_call("t", {"a": 1, "b": 2**80})
    circular: dict[str, Any] = {"a": 1}
    circular["self"] = circular
    assert canonical_call("t", circular) == canonical_call("t", circular)


def test_cycles_up_to_the_configured_period() -> None:
    names = ["a", "b", "c", "d", "e"]
    loop = detector(max_cycle_period=5, repeat_threshold=2, on_detect="stop")
    events = [loop.record_tool_call(n, {}) for _ in range(2) for n in names]
    assert events[-1] is not None and events[-1].kind == "tool-cycle"
    assert events[-1].offending == " -> ".join(f'["{n}",{{}}]' for n in names)
    short = detector(max_cycle_period=4, repeat_threshold=2)
    assert all(short.record_tool_call(n, {}) is None for _ in range(2) for n in names)


def test_disabled_detector_reports_nothing() -> None:
    loop = detector(enabled=False, max_turns=1)
    assert all(loop.record_turn() is None for _ in range(5))
    assert all(loop.record_tool_call("x", {}) is None for _ in range(5))
    loop.record_tool_result("x", {}, "same")
    assert all(loop.record_output("same") is None for _ in range(5))
    assert loop.check_stream("abc " * 500) is None
    assert loop.check_for_loop() is None
    assert loop.nudge_instruction() is None


def test_configure_switches_settings_and_disabling_resets() -> None:
    loop = LoopDetectionService()
    for _ in range(2):
        loop.record_tool_call("x", {})
    loop.configure(LoopDetectionSettings(repeat_threshold=5, max_cycle_period=2))
    assert loop.record_tool_call("x", {}) is None
    loop.configure(LoopDetectionSettings(enabled=False))
    assert loop.turns == 0
    loop.configure(LoopDetectionSettings(repeat_threshold=2))
    assert loop.record_tool_call("x", {}) is None
    assert loop.record_tool_call("x", {}) is not None


def test_secrets_in_offending_calls_are_redacted() -> None:
    token = "ghp_" + "Zq7Lm2Xp9Rt4Vb8Nc1Kd6Hf3Jg5Ws0Ye2Ua4"
    loop = detector(repeat_threshold=2)
    loop.record_tool_call("http", {"header": f"token {token}"})
    event = loop.record_tool_call("http", {"header": f"token {token}"})
    assert event is not None
    assert token not in event.offending
    assert "[REDACTED:github]" in event.offending


def test_offending_text_is_truncated() -> None:
    loop = detector(repeat_threshold=2)
    loop.record_output("x" * 5000)
    event = loop.record_output("x" * 5000)
    assert event is not None
    assert len(event.offending) <= 200
