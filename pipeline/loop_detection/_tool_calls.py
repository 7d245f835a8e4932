"""Repeated tool calls and cycles of calls, aware of results and of polling.

The same call ``repeatThreshold`` times in a row, or a cycle of calls (A B A
B..., periods up to ``maxCyclePeriod``) repeated ``repeatThreshold`` times, is a
loop unless its result changed each time (polling a growing log is progress).
A repeat whose result says the work is still going, or that waits, is a poll:
nudged at ``pollThreshold`` repeats and stopped at twice that.

Example::

    calls = ToolCallDetector(settings, Verdicts(settings), time.monotonic)
    calls.record("read_file", {"path": "a.py"})      # None, until it loops
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection._event import OFFENDING_CHARS, LoopEvent, Verdicts

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


@dataclass
class ToolCall:
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


def results_differ(a: ToolCall, b: ToolCall) -> bool:
    """True when both calls have results and they are not the same."""
    return a.result is not None and b.result is not None and a.result != b.result


class ToolCallDetector:
    """The calls of one request in a sliding window sized by the settings."""

    def __init__(
        self,
        settings: LoopDetectionSettings,
        verdicts: Verdicts,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.verdicts = verdicts
        self.clock = clock
        self.calls: deque[ToolCall] = deque(maxlen=window(settings))
        self.since_output: deque[ToolCall] = deque(maxlen=64)
        """The calls since the model's last text (they tell progress from repetition)."""

    def resize(self, settings: LoopDetectionSettings) -> None:
        """New settings; the calls recorded so far are kept in a window of the new size."""
        self.settings = settings
        self.calls = deque(self.calls, maxlen=window(settings))

    def record(self, name: str, args: Mapping[str, Any] | str | None = None) -> LoopEvent | None:
        """Record a call the model made; an event when it closes a loop."""
        canonical = canonical_call(name, args)
        digest = hash(canonical)
        calls = self.calls
        call = ToolCall(
            digest,
            canonical[: OFFENDING_CHARS * 2].decode(errors="replace"),
            at=self.clock(),
            name=name,
            args=args,
        )
        calls.append(call)
        self.since_output.append(call)
        run = self._repeat_run()
        if run >= self.settings.repeat_threshold:
            poll = self._is_poll_run(run)
            if not poll or run >= self.verdicts.poll_bar():
                what = "polled" if poll else "called"
                return self.verdicts.report(
                    "repeated-tool",
                    run,
                    calls[-1].canonical,
                    f"tool {name!r} {what} {run} times in a row with the same arguments "
                    "and no change in its result",
                    poll=poll,
                )
        return self._check_cycle()

    def _is_poll_run(self, run: int) -> bool:
        """Whether the last ``run`` identical calls are polls: a result says the work
        is still going, the call waits, or every gap between them is a wait."""
        calls = self.calls
        window = [calls[i] for i in range(len(calls) - run, len(calls))]
        if any(c.pending or c.wait for c in window):
            return True
        interval = self.settings.poll_interval_s
        return all(b.at - a.at >= interval for a, b in itertools.pairwise(window))

    def _repeat_run(self) -> int:
        """Identical calls at the end of the window whose results did not change."""
        calls = self.calls
        last = calls[-1]
        run = 1
        newer = last
        for index in range(len(calls) - 2, -1, -1):
            older = calls[index]
            if older.digest != last.digest:
                break
            if results_differ(newer, older):
                break
            run += 1
            newer = older
        return run

    def _check_cycle(self) -> LoopEvent | None:
        calls = self.calls
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
                    count = self.verdicts.poll_bar()
                    if period * count > size or not self._is_cycle(period, period * count):
                        continue
                return self.verdicts.report(
                    "tool-cycle",
                    count,
                    " -> ".join(c.canonical for c in unit),
                    f"a cycle of {period} tool calls repeated {count} times with the same results",
                    poll=poll,
                )
        return None

    def _is_cycle(self, period: int, span: int) -> bool:
        calls = self.calls
        size = len(calls)
        first = calls[size - span].digest
        distinct = False
        for index in range(size - span + period, size):
            newer, older = calls[index], calls[index - period]
            if newer.digest != older.digest:
                return False
            if results_differ(newer, older):
                return False
            distinct = distinct or newer.digest != first
        # A "cycle" of one call repeated is the repeated-tool case, reported there.
        return distinct

    def record_result(self, name: str, args: Mapping[str, Any] | str | None, result: str) -> None:
        """Attach a call's result, so a repeated call with a changing result is not a loop."""
        digest = hash(canonical_call(name, args))
        for call in reversed(self.calls):
            if call.digest == digest and call.result is None:
                call.result = hash(result)
                call.pending = _PENDING.search(result, 0, 500) is not None
                return


def window(settings: LoopDetectionSettings) -> int:
    """How many calls the longest loop the settings look for spans."""
    longest = max(settings.repeat_threshold, 2 * settings.poll_threshold)
    return longest * max(settings.max_cycle_period, 1) + 1
