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

  The check reads markdown line by line. A table row, list item, heading, block
  quote or fence line resets it, and inside a fenced code block it reads only the
  current line, with a longer span (``CODE_MIN_SPAN``): thirty identical
  ``| TBD | pending |`` rows or twenty identical lines of code are content, not
  chanting. Text that repeats what a tool returned (log lines
  quoted from a result) is quotation, allowed as many times as the source has
  it. Lines indented by four spaces or a tab are a code block too. Whole lines
  of *data* repeated (a log line, a CSV row, an identifier list: lines with a
  digit or a sign such as ``=:/|[]{}<>@#_``) are material being quoted, from a
  source the detector may not have seen (the user's paste, an earlier request):
  they are left to the whole-line check and its higher bar. Prose lines repeated
  (``I will now mark the task as complete.``) are the model chanting, stopped at
  once. Behind these, a whole-line check catches a reply whose last lines are one
  line repeated ``LINE_LOOP_LINES`` times, or a block of 2 to 8 lines repeated
  ``BLOCK_MIN_REPEATS`` times over at least ``BLOCK_MIN_LINES`` lines
  (``CODE_LOOP_LINES`` lines inside code): a table or a list that never ends,
  like SmolLM2's week of days again and again, is still stopped. Within one line,
  in a fence or not, a list whose items go round the same cycle of at least
  ``LIST_MIN_ITEMS`` items ``LIST_MIN_REPEATS`` times over ``LIST_MIN_SPAN``
  characters is a loop too (SmolLM2 printing ``['Mon', 'Tue', ..., 'Sun', 'Mon',
  ...]`` until its token limit): a repeated sentence in code is content, a list
  that cycles without end is the model's own. ``finish_answer(text)`` checks
  the part of the answer the stream check has not seen yet (a caller that checks
  the stream in batches leaves its last batch unchecked).

Polling is work. A repeated call (or cycle) with an unchanged result is a
*poll* when its result says the work is still going (``in_progress``,
``pending``, ``queued``, ``running``...), when a wait separates the calls (a
``sleep``/``wait`` call in the cycle, a wait argument, or ``pollIntervalS``
between the calls by the injected clock). An unchanged poll is nudged at
``pollThreshold`` repeats, even with ``onDetect: stop``, and stopped at twice
that; the same holds for the replies that narrate it.

A detection returns a :class:`LoopEvent`. With ``onDetect: nudge`` the first
detection of a kind has ``action="nudge"`` (and :meth:`nudge_instruction`
gives, once, a sentence for the next request); the next detection of that kind
stops. With ``onDetect: stop`` the first detection stops (polls excepted, see
above). The turn limit always stops. Once stopped, every further ``record_*``
returns the stop event again until the next user message.

Memory is bounded: calls and outputs live in sliding windows sized by the
configuration, and the stream keeps only its tail.

Example::

    detector = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    for _ in range(3):
        event = detector.record_tool_call("read_file", {"path": "a.py"})
    event.kind, event.action                        # ('repeated-tool', 'stop')
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
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
#: Inside a fenced code block only a repetition within one line counts, and it
#: must span this much: a model chanting inside a fence (SmolLM2 writes the week's
#: days again and again inside a code block) is still stopped.
CODE_MIN_SPAN = 512
#: Candidate periods examined per chunk (bounded work whatever the text).
STREAM_MAX_CANDIDATES = 8
#: Whole-line repetition: a block of up to LINE_MAX_PERIOD lines filling the last
#: LINE_LOOP_LINES non-blank lines of a reply (CODE_LOOP_LINES inside code) is a loop.
LINE_MAX_PERIOD = 8
LINE_LOOP_LINES = 40
CODE_LOOP_LINES = 80
#: A block of two or more lines (a list of the week's days, again and again) is a
#: loop sooner: BLOCK_MIN_REPEATS times and at least BLOCK_MIN_LINES lines.
BLOCK_MIN_REPEATS = 4
BLOCK_MIN_LINES = 16
#: Within one line, a cycle of LIST_MIN_ITEMS or more comma-separated items repeated
#: LIST_MIN_REPEATS times over LIST_MIN_SPAN characters is a loop, in a fence or not:
#: SmolLM2 cycles through the week's days inside a list literal that never ends.
LIST_MIN_ITEMS = 3
LIST_MIN_REPEATS = 3
LIST_MIN_SPAN = 192
#: Tool results kept as sources of quotation (the newest, each its head and tail
#: up to SOURCE_CHARS: a log's repeated lines are usually at its end).
SOURCE_KEEP = 8
SOURCE_CHARS = 32_768
#: The longest line kept whole for the markdown and whole-line checks.
LINE_KEEP = 4096

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
#: A line of an indented code block (four spaces or a tab; a blank line does not count).
_INDENTED = re.compile(r"^(?: {4}|\t)\s*\S")
#: What makes a line data rather than prose: a digit or a sign prose rarely holds.
_DATA = re.compile(r"[0-9=:/\\|\[\]{}<>@#_$%]")
_STRUCTURE = re.compile(
    r"^\s*(?:\||[-*+]\s|\d{1,9}[.)]\s|#{1,6}(?:\s|$)|>|[-=_*]{3,}\s*$|[-|: ]{3,}$)"
)
#: Words by which a status says that the work it reports is not finished.
_PENDING = re.compile(
    r"\b(?:in[ _-]?progress|pending|queued|running|waiting|starting|scheduled|building|"
    r"not (?:yet )?(?:ready|finished|done|complete|available))\b",
    re.IGNORECASE,
)
#: Tool names that wait, and argument names that ask a call to wait.
_WAIT_TOOLS = re.compile(r"^(?:sleep|wait|wait_for\w*|delay|pause)$", re.IGNORECASE)
_WAIT_ARGS = frozenset(
    {"wait", "wait_s", "wait_seconds", "waitseconds", "waitms", "sleep", "delay"}
)
_SHELL_SLEEP = re.compile(r"^\s*(?:sleep|timeout)\s+\d")

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
    "poll": (
        "You have checked the same thing {count} times and its result has not changed. "
        "If you are waiting for something slow, wait longer between checks; otherwise "
        "tell the user it is still in progress instead of checking again."
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
    at: float = 0.0
    pending: bool = False
    name: str = ""
    args: Mapping[str, Any] | str | None = None
    _wait: bool | None = None

    @property
    def wait(self) -> bool:
        """Whether the call waits (worked out only when a repeat makes it matter)."""
        if self._wait is None:
            self._wait = _is_wait(self.name, self.args)
        return self._wait


def _is_wait(name: str, args: Mapping[str, Any] | str | None) -> bool:
    """A call that waits: a ``sleep``/``wait`` tool, a shell ``sleep N``, or a call
    asked to wait (``{"wait": 30}``)."""
    if _WAIT_TOOLS.match(name):
        return True
    if isinstance(args, Mapping):
        for key, value in args.items():
            lowered = str(key).lower()
            if lowered in _WAIT_ARGS and value:
                return True
            if (
                lowered in ("command", "cmd", "script")
                and isinstance(value, str)
                and _SHELL_SLEEP.match(value)
            ):
                return True
    elif isinstance(args, str) and _SHELL_SLEEP.match(args):
        return True
    return False


def _results_differ(a: _Call, b: _Call) -> bool:
    """True when both calls have results and they are not the same."""
    return a.result is not None and b.result is not None and a.result != b.result


@dataclass
class _StreamState:
    buffer: str = ""
    reported: bool = False
    chars: int = 0
    # markdown: the unfinished line, the open fence, where the tail check starts
    line: str = ""
    fence: str = ""
    reset_at: int = 0
    # whole-line repetition: recent line digests and, per period, the run length
    lines: deque[int] = field(default_factory=lambda: deque(maxlen=LINE_MAX_PERIOD + 1))
    runs: list[int] = field(default_factory=lambda: [0] * (LINE_MAX_PERIOD + 1))
    last_line: str = ""
    quoted: tuple[str, int] | None = None


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
    sources: deque[str] = field(default_factory=lambda: deque(maxlen=SOURCE_KEEP))


class LoopDetectionService:
    """Detects loops in one conversation (spec name: LoopDetectionService)."""

    def __init__(
        self,
        settings: LoopDetectionSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or LoopDetectionSettings()
        self._clock = clock
        self._state = self._new_state()

    # -- configuration and lifecycle -------------------------------------------------

    def _window(self) -> int:
        s = self.settings
        longest = max(s.repeat_threshold, 2 * s.poll_threshold)
        return longest * max(s.max_cycle_period, 1) + 1

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

    def record_user_message(self, text: str | None = None) -> None:
        """A new user request begins: the turn count and all windows start again.
        ``text`` (the user's message) is a source the reply may quote; the sources of
        earlier requests (their tool results) stay, the newest :data:`SOURCE_KEEP`."""
        sources = self._state.sources
        self.reset()
        self._state.sources.extend(sources)
        if text:
            self._state.sources.append(_source(text))

    def begin_request(self) -> LoopEvent | None:
        """A new user message: reset, then count the request's first model turn."""
        self.record_user_message()
        return self.record_turn()

    def finish_answer(self, text: str, *, next_request: bool = False) -> LoopEvent | None:
        """Record a whole answer (its stream ends). The part of ``text`` that
        :meth:`check_stream` has not seen yet is checked first: a caller that feeds
        the stream in batches leaves its last batch unchecked, and a model looping
        until its token limit loops precisely there. ``next_request``: the answer ends
        the request, and the next one begins now, as :meth:`begin_request` would
        when it comes (its first turn is within any limit, so that is never an event)."""
        streamed = self.check_stream(text[self._state.stream.chars :])
        self.end_stream()
        event = self.record_output(text)
        if next_request:
            self.begin_request()
        return event or streamed

    @property
    def turns(self) -> int:
        """Turns recorded since the last user message."""
        return self._state.turns

    @property
    def stopped(self) -> LoopEvent | None:
        """The event that stopped this request, if any."""
        return self._state.stopped

    # -- reporting -------------------------------------------------------------------

    def _report(
        self, kind: LoopKind, count: int, offending: str, details: str, *, poll: bool = False
    ) -> LoopEvent:
        state = self._state
        action: LoopAction = "stop"
        if poll and "poll" not in state.nudged:
            # Waiting on something slow is work: always a nudge before a stop.
            action = "nudge"
            state.nudged.add("poll")
            state.pending_nudge = _NUDGES["poll"].format(count=count)
        elif (
            not poll
            and kind != "turn-limit"
            and self.settings.on_detect == "nudge"
            and kind not in state.nudged
        ):
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
        call = _Call(
            digest,
            canonical[: OFFENDING_CHARS * 2].decode(errors="replace"),
            at=self._clock(),
            name=name,
            args=args,
        )
        calls.append(call)
        state.calls_since_output.append(call)
        run = self._repeat_run()
        if run >= self.settings.repeat_threshold:
            poll = self._is_poll_run(run)
            if not poll or run >= self._poll_bar():
                what = "polled" if poll else "called"
                return self._report(
                    "repeated-tool",
                    run,
                    calls[-1].canonical,
                    f"tool {name!r} {what} {run} times in a row with the same arguments "
                    "and no change in its result",
                    poll=poll,
                )
        return self._check_cycle()

    def _poll_bar(self) -> int:
        """How many unchanged polls the next poll detection needs: the threshold,
        then twice it once nudged."""
        threshold = self.settings.poll_threshold
        return 2 * threshold if "poll" in self._state.nudged else threshold

    def _is_poll_run(self, run: int) -> bool:
        """Whether the last ``run`` identical calls are polls: a result says the work
        is still going, the call waits, or every gap between them is a wait."""
        calls = self._state.calls
        window = [calls[i] for i in range(len(calls) - run, len(calls))]
        if any(c.pending or c.wait for c in window):
            return True
        interval = self.settings.poll_interval_s
        return all(b.at - a.at >= interval for a, b in itertools.pairwise(window))

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
                unit = [calls[size - period + i] for i in range(period)]
                poll = any(c.wait or c.pending for c in unit)
                count = threshold
                if poll:
                    count = self._poll_bar()
                    if period * count > size or not self._is_cycle(period, period * count):
                        continue
                return self._report(
                    "tool-cycle",
                    count,
                    " -> ".join(c.canonical for c in unit),
                    f"a cycle of {period} tool calls repeated {count} times with the same results",
                    poll=poll,
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
        state = self._state
        if result.strip():
            state.sources.append(_source(result))
        digest = hash(canonical_call(name, args))
        for call in reversed(state.calls):
            if call.digest == digest and call.result is None:
                call.result = hash(result)
                call.pending = _PENDING.search(result, 0, 500) is not None
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
        poll = any(c.wait or c.pending for c in state.calls_since_output)
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
        bar = self._poll_bar() if poll else self.settings.repeat_threshold
        if state.output_run >= bar:
            return self._report(
                "repeated-output",
                state.output_run,
                text,
                f"the same or a near-identical reply {state.output_run} times in a row "
                f"(similarity >= {self.settings.output_similarity})",
                poll=poll,
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
        start = stream.chars
        stream.chars += len(chunk)
        buffer = stream.buffer + chunk
        keep = STREAM_MAX_PERIOD * (STREAM_MIN_REPEATS + 1) + CODE_MIN_SPAN
        if len(buffer) > 2 * keep:
            buffer = buffer[-keep:]
        stream.buffer = buffer
        if stream.reported:
            return None
        if "\n" in chunk:
            event = self._stream_lines(chunk, start)
            if event is not None:
                return event
        else:
            if len(stream.line) < LINE_KEEP:
                stream.line += chunk[: LINE_KEEP - len(stream.line)]
        # Only the text after the last structural line is looked at: inside a
        # fenced code block, the current line alone (lines of code may repeat).
        tail_start = max(0, stream.reset_at - (stream.chars - len(buffer)))
        tail = buffer[tail_start:] if tail_start else buffer
        period = _tail_period(tail, CODE_MIN_SPAN if stream.fence else STREAM_MIN_SPAN)
        if period is None:
            period = _list_period(tail)
        if period is None:
            return None
        repeats = _tail_repeats(tail, period)
        if self._quoted(tail, period, repeats) or _data_lines(tail[-period:]):
            return None
        stream.reported = True
        unit = _word_aligned(tail[-period:])
        return self._report(
            "stream-repetition",
            repeats,
            unit,
            f"the reply repeats the same {period} characters {repeats} times in a row",
        )

    def _stream_lines(self, chunk: str, start: int) -> LoopEvent | None:
        """Read the lines that ``chunk`` completes: fences, structure, repetition."""
        stream = self._state.stream
        pieces = chunk.split("\n")
        position = start
        for index, piece in enumerate(pieces[:-1]):
            line = (stream.line + piece if index == 0 else piece)[:LINE_KEEP]
            position += len(piece) + 1
            fence = _FENCE.match(line)
            in_code = bool(stream.fence)
            if fence is not None:
                marker = fence.group(1)
                if not stream.fence:
                    stream.fence = marker[0] * 3
                elif marker.startswith(stream.fence) and not line.strip(" `~"):
                    stream.fence = ""
                stream.reset_at = position
            elif in_code or _STRUCTURE.match(line) or _INDENTED.match(line):
                stream.reset_at = position
            if line.strip():
                code = in_code or fence is not None or _INDENTED.match(line) is not None
                event = self._line_repetition(line, code)
                if event is not None:
                    return event
        stream.line = pieces[-1][:LINE_KEEP]
        return None

    def _line_repetition(self, line: str, code: bool) -> LoopEvent | None:
        """Whole-line repetition: the last non-blank lines are one block repeated."""
        stream = self._state.stream
        digest = hash(line)
        lines, runs = stream.lines, stream.runs
        lines.append(digest)
        size = len(lines)
        found = limit = 0
        covered = 0  # the longest tail a shorter period explains
        for period in range(1, LINE_MAX_PERIOD + 1):
            if size > period and lines[-1 - period] == digest:
                runs[period] += 1
                cover = runs[period] + period
                # Only the smallest period counts: identical lines are no 2-line block.
                if not found and cover > covered:
                    bar = _line_limit(period, code)
                    if cover >= bar:
                        found, limit = period, bar
                covered = max(covered, cover)
            else:
                runs[period] = 0
        stream.last_line = line
        if not found:
            return None
        quoted = self._source_count(line)
        if quoted and runs[found] + found < limit + quoted * found:
            return None
        stream.reported = True
        repeats = (runs[found] + found) // found
        what = "line" if found == 1 else f"block of {found} lines"
        return self._report(
            "stream-repetition",
            repeats,
            line,
            f"the reply repeats the same {what} {repeats} times in a row",
        )

    def _source_count(self, text: str) -> int:
        """How often ``text`` occurs in the newest source that holds it (0: none)."""
        for source in reversed(self._state.sources):
            count = source.count(text)
            if count:
                return count
        return 0

    def _quoted(self, tail: str, period: int, repeats: int) -> bool:
        """Whether the repetition at the end of ``tail`` quotes a source (a tool
        result, the user's message) no more times than the source has it."""
        stream = self._state.stream
        block = tail[-2 * period :]
        unit = tail[-period:]
        if stream.quoted is not None and stream.quoted[0] == unit:
            allowed = stream.quoted[1]
        else:
            allowed = 0
            for source in reversed(self._state.sources):
                if block in source:
                    allowed = source.count(unit) + 2
                    break
            stream.quoted = (unit, allowed)
        return repeats <= allowed

    def end_stream(self) -> None:
        """The streamed response is complete; the next one is watched afresh."""
        self._state.stream = _StreamState()


def _data_lines(unit: str) -> bool:
    """Whether a repeating ``unit`` is whole lines of data (a log line, a CSV row), which
    the whole-line check judges: quoting such lines is common, chanting them is rare."""
    return "\n" in unit and _DATA.search(unit) is not None


def _source(text: str) -> str:
    """What is kept of a tool result or a user message: all of it, or its head and tail."""
    if len(text) <= SOURCE_CHARS:
        return text
    head = SOURCE_CHARS // 4
    return text[:head] + "\n" + text[-(SOURCE_CHARS - head) :]


def _line_limit(period: int, code: bool) -> int:
    """How many lines a repeated block of ``period`` lines must fill to be a loop."""
    if code:
        return CODE_LOOP_LINES
    if period == 1:
        return LINE_LOOP_LINES
    return max(BLOCK_MIN_REPEATS * period, BLOCK_MIN_LINES)


def _needed(period: int, min_span: int = STREAM_MIN_SPAN, repeats: int = STREAM_MIN_REPEATS) -> int:
    return max(period * repeats, min_span)


def _list_period(tail: str) -> int | None:
    """The period of a list cycling at the end of the last line of ``tail``: at least
    :data:`LIST_MIN_ITEMS` comma-separated items, repeated :data:`LIST_MIN_REPEATS`
    times over :data:`LIST_MIN_SPAN` characters (``None``: no such list)."""
    line = tail[tail.rfind("\n") + 1 :]
    if line.count(",") < LIST_MIN_ITEMS * LIST_MIN_REPEATS:
        return None
    period = _tail_period(line, LIST_MIN_SPAN, LIST_MIN_REPEATS)
    if period is None or line.count(",", len(line) - period) < LIST_MIN_ITEMS:
        return None
    return period


def _tail_period(
    buffer: str, min_span: int = STREAM_MIN_SPAN, repeats: int = STREAM_MIN_REPEATS
) -> int | None:
    """The smallest period p in [8, 200] repeated ``repeats`` times over at least
    ``min_span`` characters at the end of ``buffer``.

    Candidates are the distances back to earlier occurrences of the last 8
    characters (found with ``str.rfind``), at most :data:`STREAM_MAX_CANDIDATES`
    of them, each verified with one slice comparison: bounded work per chunk.
    """
    size = len(buffer)
    if size < _needed(STREAM_MIN_PERIOD, min_span, repeats):
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
            span = _needed(period, min_span, repeats)
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
