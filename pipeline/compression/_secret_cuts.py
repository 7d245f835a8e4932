"""Where a text may be cut: never inside a secret, nor inside a mask of one.

Shortening a tool result for a checkpoint keeps its head and tail and leaves out
the middle. A cut inside a credential (``ghp_`` and 36 characters) would keep a
prefix too short for the redactor to know it as one: 29 of its 36 characters
written raw into the session file. :func:`around_secrets` moves each cut out of
every secret the :class:`~ollm_cli.pipeline.environment.Redactor` finds, and out
of every ``[REDACTED:<kind>]`` mask already in the text: the head ends before
it, the tail starts after it, so a secret is kept whole (and then masked whole
by the recorder) or left out whole.

Example::

    text = "token ghp_" + "a1B2" * 9 + " end"
    around_secrets(text, text[:12], text[-6:])   # ('token ', ' end')
"""

from __future__ import annotations

import re

from ollm_cli.pipeline.environment import default_redactor

_MASK = re.compile(r"\[REDACTED:[^\]\s]{0,80}\]")


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` holds a secret or a mask of one: (start, end) character offsets."""
    spans = [(match.start, match.end) for match in default_redactor().find(text)]
    spans += [(match.start(), match.end()) for match in _MASK.finditer(text)]
    return spans


def around_secrets(text: str, head: str, tail: str) -> tuple[str, str]:
    """``head`` (a prefix of ``text``) and ``tail`` (a suffix) with neither cut inside
    a secret: a head that would end inside one ends before it, a tail that would
    start inside one starts after it."""
    if not head and not tail:
        return head, tail
    spans = secret_spans(text)
    if not spans:
        return head, tail
    if head and text.startswith(head):
        cut = _moved(len(head), spans, backwards=True)
        head = text[:cut]
    if tail and text.endswith(tail):
        cut = _moved(len(text) - len(tail), spans, backwards=False)
        tail = text[cut:]
    return head, tail


def _moved(cut: int, spans: list[tuple[int, int]], *, backwards: bool) -> int:
    """``cut`` moved to the edge of every span it falls inside (spans may overlap)."""
    moved = True
    while moved:
        moved = False
        for start, end in spans:
            if start < cut < end:
                cut = start if backwards else end
                moved = True
    return cut
