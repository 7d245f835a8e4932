"""Self-repetition within one streamed reply, read as markdown line by line.

A run of 8 to 200 characters repeated at the end of the text, at least 4 times
over at least 256 characters, is the degenerate chanting of a small model; so
is a reply whose last lines are one line or one block repeated, and a list
that cycles within one line. Tables, lists, headings, code and text quoted
from a source (a tool result, the user's message) are read as content. The
work per chunk is bounded; see the package's service module for the rules.

Example::

    stream = StreamDetector(Verdicts(settings), sources=deque())
    for chunk in chunks:
        event = stream.check(chunk)
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from ollm_cli.pipeline.loop_detection._event import LoopEvent, Verdicts

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


@dataclass
class StreamState:
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


class StreamDetector:
    """Watches one streamed reply at a time (:meth:`end` starts the next afresh).

    ``sources`` are the texts a reply may quote (tool results, the user's
    message), newest last; the service keeps them across replies.
    """

    def __init__(self, verdicts: Verdicts, sources: deque[str]) -> None:
        self.verdicts = verdicts
        self.sources = sources
        self.state = StreamState()

    def check(self, chunk: str) -> LoopEvent | None:
        """Feed one streamed chunk; reports when the response starts repeating itself."""
        if not chunk:
            return None
        stream = self.state
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
        return self.verdicts.report(
            "stream-repetition",
            repeats,
            unit,
            f"the reply repeats the same {period} characters {repeats} times in a row",
        )

    def _stream_lines(self, chunk: str, start: int) -> LoopEvent | None:
        """Read the lines that ``chunk`` completes: fences, structure, repetition."""
        stream = self.state
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
        stream = self.state
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
        return self.verdicts.report(
            "stream-repetition",
            repeats,
            line,
            f"the reply repeats the same {what} {repeats} times in a row",
        )

    def _source_count(self, text: str) -> int:
        """How often ``text`` occurs in the newest source that holds it (0: none)."""
        for source in reversed(self.sources):
            count = source.count(text)
            if count:
                return count
        return 0

    def _quoted(self, tail: str, period: int, repeats: int) -> bool:
        """Whether the repetition at the end of ``tail`` quotes a source (a tool
        result, the user's message) no more times than the source has it."""
        stream = self.state
        block = tail[-2 * period :]
        unit = tail[-period:]
        if stream.quoted is not None and stream.quoted[0] == unit:
            allowed = stream.quoted[1]
        else:
            allowed = 0
            for source in reversed(self.sources):
                if block in source:
                    allowed = source.count(unit) + 2
                    break
            stream.quoted = (unit, allowed)
        return repeats <= allowed

    def end(self) -> None:
        """The streamed reply is complete; the next one is watched afresh."""
        self.state = StreamState()


def _data_lines(unit: str) -> bool:
    """Whether a repeating ``unit`` is whole lines of data (a log line, a CSV row), which
    the whole-line check judges: quoting such lines is common, chanting them is rare."""
    return "\n" in unit and _DATA.search(unit) is not None


def source(text: str) -> str:
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
