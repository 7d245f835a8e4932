"""The automatic title of a session: the first line of its first user message.

Spec 004 (FR-6) wants a title generated from the first user message. We take
its first non-empty line, collapse the whitespace, and cut it at
:data:`TITLE_LIMIT` characters on a word boundary, ending with "…". A title
set by hand (``title_source="manual"``) always wins over this one.

Example::

    title_from_text("  Fix the   login bug\\nthe form hangs")   # "Fix the login bug"
"""

from __future__ import annotations

from ollm_cli.pipeline.terminal_text import strip_control

TITLE_LIMIT = 80
ELLIPSIS = "…"


def title_from_text(text: str, limit: int = TITLE_LIMIT) -> str | None:
    """The title for a first user message ``text``, or None when it has no words."""
    for line in strip_control(text).splitlines():
        words = line.split()
        if words:
            return shorten(" ".join(words), limit)
    return None


def clean_title(title: str, limit: int | None = None) -> str:
    """A title set by hand, on one line with its whitespace collapsed (and cut if ``limit``)."""
    words = " ".join(title.split())
    return shorten(words, limit) if limit else words


def shorten(line: str, limit: int) -> str:
    """``line`` cut to at most ``limit`` characters on a word boundary, with "…"."""
    if len(line) <= limit:
        return line
    room = limit - len(ELLIPSIS)
    cut = line[:room]
    space = cut.rfind(" ")
    if space > room // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
