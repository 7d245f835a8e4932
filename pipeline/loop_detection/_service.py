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

The service composes four detectors, each in its own module: repeated calls
and cycles (:mod:`._tool_calls`), repeated replies (:mod:`._outputs`), the
stream's self-repetition (:mod:`._stream`) and the turn limit (here); what they
find goes through one :class:`~._event.Verdicts`, which decides nudge or stop.

Example::

    detector = LoopDetectionService(LoopDetectionSettings(on_detect="stop"))
    for _ in range(3):
        event = detector.record_tool_call("read_file", {"path": "a.py"})
    event.kind, event.action                        # ('repeated-tool', 'stop')
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection._event import LoopEvent, Verdicts
from ollm_cli.pipeline.loop_detection._outputs import OutputDetector, similarity
from ollm_cli.pipeline.loop_detection._stream import (
    CODE_LOOP_LINES,
    LINE_LOOP_LINES,
    LIST_MIN_SPAN,
    SOURCE_KEEP,
    STREAM_MIN_SPAN,
    StreamDetector,
    source,
)
from ollm_cli.pipeline.loop_detection._tool_calls import ToolCallDetector, canonical_call

__all__ = [
    "CODE_LOOP_LINES",
    "LINE_LOOP_LINES",
    "LIST_MIN_SPAN",
    "STREAM_MIN_SPAN",
    "LoopDetectionService",
    "LoopEvent",
    "canonical_call",
    "similarity",
]


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
        self._sources: deque[str] = deque(maxlen=SOURCE_KEEP)
        """Texts a reply may quote: the newest tool results and user messages."""
        self._start()

    def _start(self) -> None:
        """Every detector afresh (the sources are the caller's to keep or not)."""
        self._turns = 0
        self._verdicts = Verdicts(self.settings)
        self._calls = ToolCallDetector(self.settings, self._verdicts, self._clock)
        self._outputs = OutputDetector(self.settings, self._verdicts)
        self._stream = StreamDetector(self._verdicts, self._sources)

    # -- configuration and lifecycle -------------------------------------------------

    def configure(self, settings: LoopDetectionSettings) -> None:
        """Apply new settings; what was recorded so far is kept (windows resized)."""
        self.settings = settings
        self._verdicts.settings = settings
        self._outputs.settings = settings
        self._calls.resize(settings)
        if not settings.enabled:
            self.reset()

    def reset(self) -> None:
        """Forget everything: calls, outputs, turns, the stream, nudges, stops and sources."""
        self._sources.clear()
        self._start()

    def record_user_message(self, text: str | None = None) -> None:
        """A new user request begins: the turn count and all windows start again.
        ``text`` (the user's message) is a source the reply may quote; the sources of
        earlier requests (their tool results) stay, the newest :data:`SOURCE_KEEP`."""
        self._start()
        if text:
            self._sources.append(source(text))

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
        streamed = self.check_stream(text[self._stream.state.chars :])
        self.end_stream()
        event = self.record_output(text)
        if next_request:
            self.begin_request()
        return event or streamed

    @property
    def turns(self) -> int:
        """Turns recorded since the last user message."""
        return self._turns

    @property
    def stopped(self) -> LoopEvent | None:
        """The event that stopped this request, if any."""
        return self._verdicts.stopped

    def nudge_instruction(self) -> str | None:
        """The instruction to add to the next request after a nudge (given once)."""
        return self._verdicts.take_nudge()

    def check_for_loop(self) -> LoopEvent | None:
        """The event detected since the last check (or the stop still in force)."""
        return self._verdicts.take_event()

    # -- turns -----------------------------------------------------------------------

    def record_turn(self) -> LoopEvent | None:
        """Count one model turn; beyond ``maxTurns`` the request stops."""
        if not self.settings.enabled:
            return None
        if self._verdicts.stopped is not None:
            return self._verdicts.stopped
        self._turns += 1
        limit = self.settings.max_turns
        if self._turns > limit:
            return self._verdicts.report(
                "turn-limit",
                self._turns,
                f"turn {self._turns}",
                f"{self._turns} turns in one request exceed maxTurns={limit}",
            )
        return None

    # -- tool calls ------------------------------------------------------------------

    def record_tool_call(
        self, name: str, args: Mapping[str, Any] | str | None = None
    ) -> LoopEvent | None:
        """Record a call the model made; returns an event when it closes a loop."""
        if not self.settings.enabled:
            return None
        if self._verdicts.stopped is not None:
            return self._verdicts.stopped
        return self._calls.record(name, args)

    def record_tool_result(
        self, name: str, args: Mapping[str, Any] | str | None, result: str
    ) -> None:
        """Attach a call's result, so a repeated call with a changing result is not a loop."""
        if not self.settings.enabled:
            return
        if result.strip():
            self._sources.append(source(result))
        self._calls.record_result(name, args, result)

    # -- outputs ---------------------------------------------------------------------

    def record_output(self, text: str) -> LoopEvent | None:
        """Record the model's text for one turn; near-identical repeats are a loop."""
        if not self.settings.enabled:
            return None
        if self._verdicts.stopped is not None:
            return self._verdicts.stopped
        if not text.strip():
            return None
        # The calls (and results) since the previous output: a similar text that
        # goes with new calls or new results narrates progress, not a loop.
        since = self._calls.since_output
        calls = hash(tuple((c.digest, c.result) for c in since))
        poll = any(c.wait or c.pending for c in since)
        since.clear()
        return self._outputs.record(text, calls, poll)

    # -- streaming -------------------------------------------------------------------

    def check_stream(self, chunk: str) -> LoopEvent | None:
        """Feed one streamed chunk; reports when the response starts repeating itself."""
        if not self.settings.enabled or not chunk:
            return None
        if self._verdicts.stopped is not None:
            return self._verdicts.stopped
        return self._stream.check(chunk)

    def end_stream(self) -> None:
        """The streamed response is complete; the next one is watched afresh."""
        self._stream.end()
