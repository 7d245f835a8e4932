"""LoopDetectionService: stopping runaway tool calls and degenerate output.

One :class:`LoopDetectionService` per conversation. The coordinator feeds it what
happens during one user request and asks, after each event, whether a loop
showed up:

- ``record_user_message()`` starts a new request: everything is forgotten
  (the turn limit counts turns per user request);
- ``record_turn()`` counts model turns; beyond ``maxTurns`` the turn stops;
- ``record_tool_call(name, args)`` / ``record_tool_result(name, args, result)``
  track calls. Arguments are compared canonically (key order and JSON
  formatting do not matter, string values are exact). The same call
  ``repeatThreshold`` times in a row is a loop, and so is a cycle of calls
  (A B A B..., periods up to ``maxCyclePeriod``) repeated ``repeatThreshold``
  times. Detection is *result-aware*: a repeated call whose result changed
  each time (polling a build, tailing a growing log) is progress, not a loop;
- ``record_output(text)`` tracks the model's text turn by turn: the same or a
  near-identical text (similarity >= ``outputSimilarity``, see
  :func:`similarity`) ``repeatThreshold`` times in a row, with the same tool
  calls and results in between, is a loop. Empty texts (turns that only call
  tools) are ignored;
- ``check_stream(chunk)`` watches one streamed response for the degenerate
  self-repetition of small models: a run of 8 to 200 characters repeated
  exactly at the end of the text, at least 4 times and over at least 256
  characters (a run that is itself shorter than 8 characters, like ``0, 0,``
  or ``=====``, does not count). It is found incrementally with a bounded
  amount of work per chunk; ``end_stream()`` closes the response.

A detection returns a :class:`LoopEvent`. With ``onDetect: nudge`` the first
detection of a kind has ``action="nudge"`` (and :meth:`nudge_instruction`
gives, once, a sentence for the next request); the next detection of that kind
stops. With ``onDetect: stop`` the first detection stops. The turn limit always
stops. Once stopped, every further ``record_*`` returns the stop event again
until the next user message.

Memory is bounded: calls and outputs live in sliding windows sized by the
configuration, and the stream keeps only its tail.

Example::

    detector = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    for _ in range(3):
        event = detector.record_tool_call("read_file", {"path": "a.py"})
    event.kind, event.action                        # ('repeated-tool', 'stop')
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.environment import redact

logger = logging.getLogger(__name__)

LoopKind = Literal[
    "repeated-tool", "tool-cycle", "repeated-output", "stream-repetition", "turn-limit"
]
LoopAction = Literal["nudge", "stop"]

#: How much of a call or a text an event shows.
OFFENDING_CHARS = 200
#: How much of each output the similarity measure reads (head and tail).
OUTPUT_SAMPLE_CHARS = 2000

STREAM_MIN_PERIOD = 8
STREAM_MAX_PERIOD = 200
STREAM_MIN_REPEATS = 4
STREAM_MIN_SPAN = 256
#: Candidate periods examined per chunk (bounded work whatever the text).
STREAM_MAX_CANDIDATES = 8

_NUDGES: dict[str, str] = {
    "repeated-tool": (
        "You have made the same tool call {count} times in a row and its result did not "
        "change. Do not repeat it: use the result you already have, try a different "
        "approach, or tell the user what is blocking you."
    ),
    "tool-cycle": (
        "You are repeating the same cycle of tool calls ({count} times) without progress. "
        "Stop the cycle: change your approach or explain to the user what is blocking you."
    ),
    "repeated-output": (
        "Your last {count} replies were (nearly) identical. Do not repeat yourself: "
        "either make progress with a different step or give the user your final answer."
    ),
    "stream-repetition": (
        "Your previous reply started repeating the same text over and over. "
        "Answer concisely and do not repeat phrases."
    ),
}


class LoopEvent(BaseModel):
    """A detected loop: what repeated, how often, and what the coordinator must do."""

    kind: LoopKind
    details: str
    count: int
    action: LoopAction
    offending: str


def _truncate(text: str, limit: int = OFFENDING_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def canonical_call(name: str, args: Mapping[str, Any] | str | None) -> bytes:
    """A tool call as canonical JSON bytes: sorted keys, no formatting whitespace.

    ``args`` may be a mapping or a JSON string (as some servers send it); a
    string that is not JSON is compared as it is, stripped.
    """
    if isinstance(args, str):
        try:
            parsed: Any = orjson.loads(args) if args.strip() else {}
        except orjson.JSONDecodeError:
            parsed = args.strip()
    else:
        parsed = {} if args is None else args
    try:
        return orjson.dumps(
            [name, parsed],
            option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
            default=repr,
        )
    except orjson.JSONEncodeError:
        # Integers beyond 64 bits, circular structures: the slower, lenient path.
        try:
            text = json.dumps([name, parsed], sort_keys=True, separators=(",", ":"), default=repr)
        except (TypeError, ValueError):
            text = repr([name, parsed])
        return text.encode()


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    if len(words) < 3:
        return {tuple(words)}
    return set(zip(words, words[1:], words[2:], strict=False))


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search over C-speed slice compares."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Output:
    """One recorded reply: its sample, digest, the calls before it, shingles on demand."""

    __slots__ = ("_shingles", "calls", "digest", "text")

    def __init__(self, text: str, calls: int) -> None:
        self.text = _sample(text)
        self.digest = hash(self.text)
        self.calls = calls
        self._shingles: set[tuple[str, ...]] | None = None

    def shingles(self) -> set[tuple[str, ...]]:
        if self._shingles is None:
            self._shingles = _shingles(self.text)
        return self._shingles


def similarity(a: str, b: str) -> float:
    """How alike two texts are, in [0, 1]; 1.0 for equal texts.

    The larger of two cheap measures on (the head and tail of) the texts: the
    share of characters outside one changed region (common prefix + suffix,
    which catches "attempt 2" vs "attempt 3"), and the Jaccard index of word
    trigrams (which catches a few scattered changes in a long text). Both are
    linear in the text length.
    """
    return _similarity(_Output(a, 0), _Output(b, 0), 1.0)


def _sample(text: str) -> str:
    if len(text) <= OUTPUT_SAMPLE_CHARS:
        return text
    half = OUTPUT_SAMPLE_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def _similarity(x: _Output, y: _Output, enough: float) -> float:
    """The similarity of two outputs; stops early once it reaches ``enough``."""
    a, b = x.text, y.text
    if x.digest == y.digest and a == b:
        return 1.0
    prefix = _common_prefix(a, b)
    suffix = _common_suffix(a, b, min(len(a), len(b)) - prefix)
    edit = 2 * (prefix + suffix) / (len(a) + len(b))
    if edit >= enough:
        return edit
    sa, sb = x.shingles(), y.shingles()
    common = len(sa & sb)
    union = len(sa) + len(sb) - common
    return max(edit, common / union if union else 0.0)


@dataclass
class _Call:
    digest: int
    canonical: str
    result: int | None = None


def _results_differ(a: _Call, b: _Call) -> bool:
    """True when both calls have results and they are not the same."""
    return a.result is not None and b.result is not None and a.result != b.result


@dataclass
class _StreamState:
    buffer: str = ""
    reported: bool = False
    chars: int = 0


@dataclass
class _State:
    calls: deque[_Call]
    outputs: deque[_Output]
    turns: int = 0
    calls_since_output: deque[_Call] = field(default_factory=lambda: deque(maxlen=64))
    output_run: int = 0
    stream: _StreamState = field(default_factory=_StreamState)
    nudged: set[str] = field(default_factory=set)
    pending_nudge: str | None = None
    stopped: LoopEvent | None = None
    last_event: LoopEvent | None = None


class LoopDetectionService:
    """Detects loops in one conversation (spec name: LoopDetectionService)."""

    def __init__(self, settings: LoopDetectionSettings | None = None) -> None:
        self.settings = settings or LoopDetectionSettings()
        self._state = self._new_state()

    # -- configuration and lifecycle -------------------------------------------------

    def _window(self) -> int:
        s = self.settings
        return max(s.repeat_threshold * max(s.max_cycle_period, 1), s.repeat_threshold) + 1

    def _new_state(self) -> _State:
        return _State(
            calls=deque(maxlen=self._window()),
            outputs=deque(maxlen=2),
        )

    def configure(self, settings: LoopDetectionSettings) -> None:
        """Apply new settings; what was recorded so far is kept (windows resized)."""
        self.settings = settings
        old = self._state
        old.calls = deque(old.calls, maxlen=self._window())
        if not settings.enabled:
            self.reset()

    def reset(self) -> None:
        """Forget everything: calls, outputs, turns, the stream, nudges and stops."""
        self._state = self._new_state()

    def record_user_message(self) -> None:
        """A new user request begins: the turn count and all windows start again."""
        self.reset()

    def begin_request(self) -> LoopEvent | None:
        """A new user message: reset, then count the request's first model turn."""
        self.record_user_message()
        return self.record_turn()

    def finish_answer(self, text: str, *, next_request: bool = False) -> LoopEvent | None:
        """Record a whole answer (its stream ends). ``next_request``: the answer ends
        the request, and the next one begins now, as :meth:`begin_request` would
        when it comes (its first turn is within any limit, so that is never an event)."""
        self.end_stream()
        event = self.record_output(text)
        if next_request:
            self.begin_request()
        return event

    @property
    def turns(self) -> int:
        """Turns recorded since the last user message."""
        return self._state.turns

    @property
    def stopped(self) -> LoopEvent | None:
        """The event that stopped this request, if any."""
        return self._state.stopped

    # -- reporting -------------------------------------------------------------------

    def _report(self, kind: LoopKind, count: int, offending: str, details: str) -> LoopEvent:
        state = self._state
        action: LoopAction = "stop"
        if kind != "turn-limit" and self.settings.on_detect == "nudge" and kind not in state.nudged:
            action = "nudge"
            state.nudged.add(kind)
            state.pending_nudge = _NUDGES[kind].format(count=count)
        event = LoopEvent(
            kind=kind,
            details=details,
            count=count,
            action=action,
            offending=_truncate(redact(offending)),
        )
        if action == "stop":
            state.stopped = event
        state.last_event = event
        logger.info("loop detected: %s (%s, count %d)", kind, action, count)
        return event

    def nudge_instruction(self) -> str | None:
        """The instruction to add to the next request after a nudge (given once)."""
        instruction, self._state.pending_nudge = self._state.pending_nudge, None
        return instruction

    def check_for_loop(self) -> LoopEvent | None:
        """The event detected since the last check (or the stop still in force)."""
        state = self._state
        event, state.last_event = state.last_event, None
        return event or state.stopped

    # -- turns -----------------------------------------------------------------------

    def record_turn(self) -> LoopEvent | None:
        """Count one model turn; beyond ``maxTurns`` the request stops."""
        if not self.settings.enabled:
            return None
        state = self._state
        if state.stopped is not None:
            return state.stopped
        state.turns += 1
        limit = self.settings.max_turns
        if state.turns > limit:
            return self._report(
                "turn-limit",
                state.turns,
                f"turn {state.turns}",
                f"{state.turns} turns in one request exceed maxTurns={limit}",
            )
        return None

    # -- tool calls ------------------------------------------------------------------

    def record_tool_call(
        self, name: str, args: Mapping[str, Any] | str | None = None
    ) -> LoopEvent | None:
        """Record a call the model made; returns an event when it closes a loop."""
        if not self.settings.enabled:
            return None
        state = self._state
        if state.stopped is not None:
            return state.stopped
        canonical = canonical_call(name, args)
        digest = hash(canonical)
        calls = state.calls
        call = _Call(digest, canonical[: OFFENDING_CHARS * 2].decode(errors="replace"))
        calls.append(call)
        state.calls_since_output.append(call)
        threshold = self.settings.repeat_threshold
        run = self._repeat_run()
        if run >= threshold:
            return self._report(
                "repeated-tool",
                run,
                calls[-1].canonical,
                f"tool {name!r} called {run} times in a row with the same arguments "
                "and no change in its result",
            )
        return self._check_cycle()

    def _repeat_run(self) -> int:
        """Identical calls at the end of the window whose results did not change."""
        calls = self._state.calls
        last = calls[-1]
        run = 1
        newer = last
        for index in range(len(calls) - 2, -1, -1):
            older = calls[index]
            if older.digest != last.digest:
                break
            if _results_differ(newer, older):
                break
            run += 1
            newer = older
        return run

    def _check_cycle(self) -> LoopEvent | None:
        calls = self._state.calls
        threshold = self.settings.repeat_threshold
        size = len(calls)
        for period in range(2, self.settings.max_cycle_period + 1):
            span = period * threshold
            if span > size:
                break
            if calls[-1].digest != calls[-1 - period].digest:
                continue
            if self._is_cycle(period, span):
                unit = [calls[size - period + i].canonical for i in range(period)]
                return self._report(
                    "tool-cycle",
                    threshold,
                    " -> ".join(unit),
                    f"a cycle of {period} tool calls repeated {threshold} times "
                    "with the same results",
                )
        return None

    def _is_cycle(self, period: int, span: int) -> bool:
        calls = self._state.calls
        size = len(calls)
        first = calls[size - span].digest
        distinct = False
        for index in range(size - span + period, size):
            newer, older = calls[index], calls[index - period]
            if newer.digest != older.digest:
                return False
            if _results_differ(newer, older):
                return False
            distinct = distinct or newer.digest != first
        # A "cycle" of one call repeated is the repeated-tool case, reported there.
        return distinct

    def record_tool_result(
        self, name: str, args: Mapping[str, Any] | str | None, result: str
    ) -> None:
        """Attach a call's result, so a repeated call with a changing result is not a loop."""
        if not self.settings.enabled:
            return
        digest = hash(canonical_call(name, args))
        for call in reversed(self._state.calls):
            if call.digest == digest and call.result is None:
                call.result = hash(result)
                return

    # -- outputs ---------------------------------------------------------------------

    def record_output(self, text: str) -> LoopEvent | None:
        """Record the model's text for one turn; near-identical repeats are a loop."""
        if not self.settings.enabled:
            return None
        state = self._state
        if state.stopped is not None:
            return state.stopped
        if not text.strip():
            return None
        # The calls (and results) since the previous output: a similar text that
        # goes with new calls or new results narrates progress, not a loop.
        calls = hash(tuple((c.digest, c.result) for c in state.calls_since_output))
        state.calls_since_output.clear()
        current = _Output(text, calls)
        previous = state.outputs[-1] if state.outputs else None
        threshold = self.settings.output_similarity
        if (
            previous is not None
            and previous.calls == current.calls
            and _similarity(previous, current, threshold) >= threshold
        ):
            state.output_run += 1
        else:
            state.output_run = 1
        state.outputs.append(current)
        if state.output_run >= self.settings.repeat_threshold:
            return self._report(
                "repeated-output",
                state.output_run,
                text,
                f"the same or a near-identical reply {state.output_run} times in a row "
                f"(similarity >= {self.settings.output_similarity})",
            )
        return None

    # -- streaming -------------------------------------------------------------------

    def check_stream(self, chunk: str) -> LoopEvent | None:
        """Feed one streamed chunk; reports when the response starts repeating itself."""
        if not self.settings.enabled or not chunk:
            return None
        state = self._state
        if state.stopped is not None:
            return state.stopped
        stream = state.stream
        stream.chars += len(chunk)
        buffer = stream.buffer + chunk
        keep = STREAM_MAX_PERIOD * (STREAM_MIN_REPEATS + 1) + STREAM_MIN_SPAN
        if len(buffer) > 2 * keep:
            buffer = buffer[-keep:]
        stream.buffer = buffer
        if stream.reported:
            return None
        period = _tail_period(buffer)
        if period is None:
            return None
        stream.reported = True
        repeats = _tail_repeats(buffer, period)
        unit = _word_aligned(buffer[-period:])
        return self._report(
            "stream-repetition",
            repeats,
            unit,
            f"the reply repeats the same {period} characters {repeats} times in a row",
        )

    def end_stream(self) -> None:
        """The streamed response is complete; the next one is watched afresh."""
        self._state.stream = _StreamState()


def _needed(period: int) -> int:
    return max(period * STREAM_MIN_REPEATS, STREAM_MIN_SPAN)


def _tail_period(buffer: str) -> int | None:
    """The smallest period p in [8, 200] whose repetition fills the end of ``buffer``.

    Candidates are the distances back to earlier occurrences of the last 8
    characters (found with ``str.rfind``), at most :data:`STREAM_MAX_CANDIDATES`
    of them, each verified with one slice comparison: bounded work per chunk.
    """
    size = len(buffer)
    if size < _needed(STREAM_MIN_PERIOD):
        return None
    probe = buffer[-STREAM_MIN_PERIOD:]
    probe_start = size - STREAM_MIN_PERIOD
    low = max(0, probe_start - STREAM_MAX_PERIOD)
    high = probe_start  # an occurrence must end where the probe starts, or earlier
    for _ in range(STREAM_MAX_CANDIDATES):
        found = buffer.rfind(probe, low, high)
        if found == -1:
            return None
        period = probe_start - found
        if period >= STREAM_MIN_PERIOD:
            span = _needed(period)
            if span <= size:
                tail = buffer[size - span :]
                if tail[period:] == tail[:-period]:
                    # "!!!!" or "0, 0, 0, " is not a run of meaningful length.
                    if any(tail[q:] == tail[:-q] for q in range(1, STREAM_MIN_PERIOD)):
                        return None
                    return period
        high = found + STREAM_MIN_PERIOD - 1
    return None


def _word_aligned(unit: str) -> str:
    """Rotate a repeating unit so that it starts at a word ("I am... " not "m... I a")."""
    space = unit.find(" ")
    if 0 <= space < len(unit) - 1:
        return unit[space + 1 :] + unit[: space + 1]
    return unit


def _tail_repeats(buffer: str, period: int) -> int:
    """How many whole periods repeat at the end of ``buffer``."""
    unit = buffer[-period:]
    count = 1
    end = len(buffer) - period
    while end - period >= 0 and buffer[end - period : end] == unit:
        count += 1
        end -= period
    return count
