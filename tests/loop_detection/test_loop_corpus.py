"""The loop detector on the corpus (:mod:`tests.loop_detection.loop_corpus`): no alarm on
honest work, every real loop stopped; and the rules behind it, one by one."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection._service import (
    CODE_LOOP_LINES,
    LINE_LOOP_LINES,
    LoopDetectionService,
    LoopEvent,
)
from tests.loop_detection.loop_corpus import LEGITIMATE, LOOPS, Clock, Scenario, run, score


@pytest.mark.parametrize("scenario", LEGITIMATE, ids=[s.name for s in LEGITIMATE])
def test_honest_work_raises_no_alarm(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.events == []


@pytest.mark.parametrize("scenario", LOOPS, ids=[s.name for s in LOOPS])
def test_every_real_loop_is_stopped(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.stopped is not None
    if outcome.stopped.kind != "turn-limit":
        # a nudge always comes first with the default onDetect: nudge
        assert outcome.events[0].action == "nudge"


def test_precision_and_recall_on_the_corpus() -> None:
    result = score()
    assert result.legitimate >= 25 and result.loops >= 20
    assert result.false_alarms == () and result.missed == ()
    assert result.precision == 1.0 and result.recall == 1.0


def _feed(loop: LoopDetectionService, text: str, size: int = 5) -> list[LoopEvent]:
    found = [loop.check_stream(text[i : i + size]) for i in range(0, len(text), size)]
    return [event for event in found if event is not None]


def test_inside_a_fence_only_long_chanting_within_one_line_counts() -> None:
    unit = "The same sentence comes back again. "
    loop = LoopDetectionService()
    code = "```text\n" + (unit * 3 + "\n") * 30 + unit * 12 + "\n```\n"
    assert _feed(loop, "Code:\n" + code) == []  # 432 characters on one line: not yet
    after = _feed(loop, unit * 20)
    assert [event.kind for event in after] == ["stream-repetition"]
    chanting = LoopDetectionService()
    events = _feed(chanting, "```\n[" + "Monday, Tuesday, Sunday, " * 40)
    assert len(events) == 1 and "Monday" in events[0].offending


def test_a_tilde_fence_is_closed_only_by_tildes() -> None:
    loop = LoopDetectionService()
    text = "~~~\n```\n" + "echo one two three four five\n" * 30 + "~~~\n"
    assert _feed(loop, text) == []
    assert loop._stream.state.fence == ""


def test_structure_resets_the_content_check() -> None:
    unit = "Repeating this sentence once more. "
    for marker in ("| a | b |", "* item", "- item", "+ item", "1. item", "42) item", "## Heading"):
        loop = LoopDetectionService()
        assert _feed(loop, unit * 3 + "\n" + marker + "\n" + unit * 3) == [], marker


def test_an_endless_table_is_still_stopped_at_the_line_limit() -> None:
    loop = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    header = "| Planet | Moon |\n| --- | --- |\n"
    rows = "| Europa | Europa |\n"
    assert _feed(loop, header + rows * (LINE_LOOP_LINES - 1)) == []
    events = _feed(loop, rows)
    assert [(e.kind, e.action) for e in events] == [("stream-repetition", "stop")]
    assert "| Europa | Europa |" in events[0].offending


def test_code_lines_have_a_higher_line_limit() -> None:
    loop = LoopDetectionService()
    line = "    total += values[i] * weights[i];\n"
    assert _feed(loop, "```c\n" + line * (CODE_LOOP_LINES - 1)) == []
    assert len(_feed(loop, line)) == 1


def test_a_block_of_lines_repeated_is_found_too() -> None:
    loop = LoopDetectionService()
    block = "- check the file\n- the file is missing\n- create the file\n"
    events = _feed(loop, block * (LINE_LOOP_LINES // 3 + 1))
    assert events and "block of 3 lines" in events[0].details


def test_quoting_a_tool_result_is_allowed_as_often_as_the_result_has_it() -> None:
    line = "ERROR disk quota exceeded for volume /data (code 122)\n"
    loop = LoopDetectionService()
    loop.record_tool_result("read_file", {"path": "err.log"}, line * 10)
    assert _feed(loop, "It says:\n" + line * 10 + "So the disk is full.\n") == []
    loop.end_stream()
    # far more than the source has, and past the whole-line bar for data lines
    assert _feed(loop, "Again:\n" + line * 80) != []


def test_the_users_message_is_a_source_too() -> None:
    # prose: data lines (digits, signs) are quotation with or without a source
    line = "Warning, the retry budget is exhausted for this shard.\n"
    loop = LoopDetectionService()
    loop.record_user_message("Why does my log say this?\n" + line * 12)
    assert _feed(loop, "Your log repeats:\n" + line * 12 + "That means...") == []
    fresh = LoopDetectionService()
    assert _feed(fresh, "Your log repeats:\n" + line * 12) != []


def test_a_wait_between_identical_calls_makes_them_polls() -> None:
    """No status words at all: the time between the calls (injected clock) decides."""
    clock = Clock()
    settings = LoopDetectionSettings(on_detect="stop", poll_threshold=4, poll_interval_s=20)
    loop = LoopDetectionService(settings, clock=clock)
    events = []
    for _ in range(8):
        events.append(loop.record_tool_call("http_get", {"url": "http://127.0.0.1/queue"}))
        loop.record_tool_result("http_get", {"url": "http://127.0.0.1/queue"}, "3 items")
        clock.now += 25
    assert events[:3] == [None] * 3
    first, last = events[3], events[7]
    assert first is not None and first.action == "nudge"
    assert events[4:7] == [None] * 3
    assert last is not None and last.action == "stop"
    quick = LoopDetectionService(settings, clock=Clock())
    fast = [quick.record_tool_call("http_get", {"url": "u"}) for _ in range(3)]
    assert fast[-1] is not None and fast[-1].action == "stop"


def test_a_sleep_in_the_cycle_makes_it_a_poll_and_a_nudge_comes_first() -> None:
    loop = LoopDetectionService(LoopDetectionSettings(on_detect="stop", poll_threshold=3))
    events = []
    for _ in range(6):
        events.append(loop.record_tool_call("shell", {"command": "sleep 10"}))
        loop.record_tool_result("shell", {"command": "sleep 10"}, "")
        events.append(loop.record_tool_call("job_status", {"job": "x"}))
        loop.record_tool_result("job_status", {"job": "x"}, "done: 0 rows")
    found = [(i, e.kind, e.action) for i, e in enumerate(events) if e is not None]
    assert found[0] == (5, "tool-cycle", "nudge")
    assert found[-1] == (11, "tool-cycle", "stop")


def test_a_wait_argument_makes_a_poll() -> None:
    loop = LoopDetectionService(LoopDetectionSettings(poll_threshold=5))
    args = {"run_id": 7, "wait": 30}
    events = [loop.record_tool_call("ci_wait", args) for _ in range(4)]
    assert events == [None] * 4


def test_narrating_a_poll_is_held_to_the_poll_threshold() -> None:
    loop = LoopDetectionService(LoopDetectionSettings(poll_threshold=6))
    events = []
    for _ in range(5):
        events.append(loop.record_output("Still waiting for the build."))
        events.append(loop.record_tool_call("build_status", {"id": 1}))
        loop.record_tool_result("build_status", {"id": 1}, "queued")
    assert events == [None] * 10


@given(
    row=st.text(alphabet=string.ascii_letters + " ", min_size=1, max_size=30),
    count=st.integers(1, LINE_LOOP_LINES - 3),
    size=st.integers(1, 40),
)
def test_tables_of_identical_rows_below_the_line_limit_never_alarm(
    row: str, count: int, size: int
) -> None:
    loop = LoopDetectionService()
    text = "| A | B |\n|---|---|\n" + f"| {row} | {row} |\n" * count
    assert _feed(loop, text, size) == []


@given(
    words=st.lists(
        st.sampled_from(["check", "file", "again", "now", "the", "I", "will", "read", "it"]),
        min_size=3,
        max_size=12,
    ).filter(lambda w: len(set(w)) >= 3),
    size=st.integers(1, 60),
)
def test_chanting_prose_is_always_caught(words: list[str], size: int) -> None:
    unit = " ".join(words) + ". "
    loop = LoopDetectionService()
    repeats = max(5, 300 // len(unit) + 2)
    assert len(_feed(loop, "Well. " + unit * repeats, size)) == 1


def test_quotation_is_judged_per_repeated_text() -> None:
    """A text quoted from a result does not lend its allowance to another text of
    the same length."""
    # prose lines: lines of data are left to the whole-line check with or without a source
    quoted = "Connection reset by peer on the left node\n"
    other = "Connection reset by peer on the main node\n"
    loop = LoopDetectionService()
    loop.record_tool_result("read_file", {"path": "x.log"}, quoted * 20)
    assert _feed(loop, quoted * 20 + "and then:\n") == []
    assert _feed(loop, other * 12) != []


def test_the_end_of_a_long_result_is_kept_for_quotation() -> None:
    line = "FATAL out of memory in worker 3\n"
    loop = LoopDetectionService()
    loop.record_tool_result("read_file", {"path": "big.log"}, "x" * 200_000 + "\n" + line * 12)
    assert _feed(loop, line * 12) == []


def test_a_line_without_end_keeps_bounded_memory() -> None:
    loop = LoopDetectionService()
    for index in range(3000):
        loop.check_stream(f"word{index} ")
    assert len(loop._stream.state.line) <= 4096


def test_a_finished_result_that_says_still_is_no_poll() -> None:
    loop = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    args = {"path": "src/app.py"}
    events = []
    for _ in range(3):
        events.append(loop.record_tool_call("lint", args))
        loop.record_tool_result("lint", args, "src/app.py:3: the import is still unused")
    assert events[-1] is not None and events[-1].action == "stop"


def test_data_lines_quoted_without_a_source_are_no_loop_but_prose_lines_are() -> None:
    """Issue 23: a quoted log of 12 identical lines (the user's paste, an earlier
    request's result) is not a loop; the same count of a prose line is chanting."""
    log = "2025-03-02 10:14:07 WARN pool-3 connection reset by peer; retrying in 5s\n"
    assert _feed(LoopDetectionService(), "Your log:\n" + log * 12 + "It resets.") == []
    prose = "I will now check the connection pool again.\n"
    assert _feed(LoopDetectionService(), "Plan:\n" + prose * 12) != []
    # a data line the model keeps on writing is still stopped, at the whole-line bar
    assert _feed(LoopDetectionService(), "Your log:\n" + log * 60) != []


def test_indented_lines_are_a_code_block() -> None:
    frame = "    at recurse (/srv/app/src/tree.js:31:12)\n"
    assert _feed(LoopDetectionService(), "Trace:\n" + frame * 40 + "No base case.") == []
    assert _feed(LoopDetectionService(), "Trace:\n" + frame * 120) != []


def test_a_result_of_an_earlier_request_is_still_a_source() -> None:
    line = "Warning, the retry budget is exhausted for this shard.\n"
    loop = LoopDetectionService()
    loop.record_tool_result("read_file", {"path": "x.log"}, line * 12)
    loop.begin_request()
    assert _feed(loop, "As before:\n" + line * 12 + "So it gave up.") == []
    loop.reset()
    assert _feed(loop, "As before:\n" + line * 12) != []
