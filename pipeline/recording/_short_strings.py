"""A JSON byte stream whose strings are cut short: reading any file in bounded memory.

An incremental JSON parser (ijson) still hands over each string whole: one 60 MB
message in a session file is 60 MB (and more, decoded) in memory however the file
is read. :class:`ShortStrings` wraps a binary file and yields the same JSON with
every string literal longer than ``limit`` bytes (as written in the file, escapes
included) cut to its first ``limit`` bytes, still valid JSON: never inside an
escape (``\\n``, ``\\u00e9``, a surrogate pair) nor a UTF-8 character. What is
dropped is skipped at the speed of a regular expression, never kept.

The state between reads is small: whether the stream is inside a string, how many
bytes of it were kept, and at most a few bytes held back where a read ended inside
an escape or a character.

Example::

    with open(path, "rb") as raw:
        for prefix, event, value in ijson.parse(ShortStrings(raw, 65536)):
            ...  # no string value is longer than 65,536 bytes of the file
"""

from __future__ import annotations

import re
from typing import BinaryIO

_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_BACKSLASH = 0x5C
CHUNK = 1 << 16


def _backslashes_before(data: bytes, at: int, floor: int) -> int:
    """How many backslashes come right before ``data[at]`` (from ``floor`` on)."""
    start = at
    while start > floor and data[start - 1] == _BACKSLASH:
        start -= 1
    return at - start


def _unit_at(data: bytes, at: int, floor: int) -> tuple[int, int]:
    """The escape (start, length) that the backslash at ``at`` belongs to: it opens one
    (``\\uXXXX``: 6 bytes, others 2) or is the escaped character of ``\\\\``."""
    if _backslashes_before(data, at, floor) % 2:
        return at - 1, 2
    return at, 6 if data[at + 1 : at + 2] == b"u" else 2


def _string_end(data: bytes, at: int, end: int) -> int:
    """Where the string whose content goes on at ``data[at]`` closes (its quote), or
    ``end``: the next quote that no backslash escapes."""
    while True:
        quote = data.find(b'"', at, end)
        if quote < 0 or _backslashes_before(data, quote, at) % 2 == 0:
            return end if quote < 0 else quote
        at = quote + 1


class ShortStrings:
    """A binary stream of JSON with every string cut to ``limit`` bytes (see the module)."""

    def __init__(self, raw: BinaryIO, limit: int, *, chunk: int = CHUNK) -> None:
        """``chunk``: how much of ``raw`` one read takes."""
        self.raw = raw
        self.limit = limit
        self.chunk = chunk
        self.cut = 0
        """How many strings were cut so far."""
        self._in_string = False
        self._kept = 0
        self._dropping = False
        self._pending = b""
        self._out = bytearray()
        self._eof = False

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes of the cut JSON (all of it when ``size`` is negative);
        empty only at the end."""
        while (size < 0 or len(self._out) < size) and not self._eof:
            chunk = self.raw.read(self.chunk)
            self._eof = not chunk
            self._feed(self._pending + chunk)
        if size < 0 or size >= len(self._out):
            taken = bytes(self._out)
            self._out.clear()
            return taken
        taken = bytes(self._out[:size])
        del self._out[:size]
        return taken

    def _safe_end(self, data: bytes) -> int:
        """How much of ``data`` can be read now: not a final escape or UTF-8 character
        whose rest is still to come (the end of the file ends everything)."""
        if self._eof:
            return len(data)
        end = len(data)
        last = data.rfind(b"\\", max(0, end - 6))
        if last >= 0:
            start, length = _unit_at(data, last, 0)
            if start + length > end:
                end = start
        if (
            end >= 6
            and _HIGH_SURROGATE.fullmatch(data, end - 6, end)
            and _backslashes_before(data, end - 6, 0) % 2 == 0
        ):
            end -= 6  # its low surrogate may follow: the pair is read together
        for back in range(1, min(4, end) + 1):
            byte = data[end - back]
            if byte & 0xC0 == 0xC0:  # the lead byte of a character of 2 to 4 bytes
                length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                if back < length:
                    end -= back
                break
            if byte & 0x80 == 0:
                break
        return end

    def _feed(self, data: bytes) -> None:
        end = self._safe_end(data)
        self._pending = data[end:]
        out = self._out
        at = 0
        while at < end:
            if not self._in_string:
                quote = data.find(b'"', at, end)
                if quote < 0:
                    out += data[at:end]
                    return
                out += data[at : quote + 1]
                at = quote + 1
                self._in_string, self._kept, self._dropping = True, 0, False
                continue
            stop = _string_end(data, at, end)
            if not self._dropping:
                room = self.limit - self._kept
                if stop - at <= room:
                    out += data[at:stop]
                    self._kept += stop - at
                else:
                    cut = self._cut_point(data, at, at + room)
                    out += data[at:cut]
                    self._dropping = True
                    self.cut += 1
            if stop < end:  # its closing quote
                out += b'"'
                self._in_string = False
                stop += 1
            at = stop

    @staticmethod
    def _cut_point(data: bytes, floor: int, cut: int) -> int:
        """``cut``, moved back so that it splits no escape, no surrogate pair and no
        UTF-8 character of the string content that begins at ``floor``."""
        last = data.rfind(b"\\", max(floor, cut - 6), cut)
        if last >= 0:
            start, length = _unit_at(data, last, floor)
            if start + length > cut:
                cut = start
        while cut > floor and data[cut] & 0xC0 == 0x80:
            cut -= 1
        if (
            cut - 6 >= floor
            and _HIGH_SURROGATE.fullmatch(data, cut - 6, cut)
            and _backslashes_before(data, cut - 6, floor) % 2 == 0
        ):
            cut -= 6  # a high surrogate keeps its low one, or goes
        return cut
