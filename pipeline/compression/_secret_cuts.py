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


NEAR = 8192
"""How far from a cut secrets are looked for (each way): longer than any credential
(a 4096-bit RSA private key in PEM is about 3,300 characters), and a bounded cost
however long the text (a whole-text scan of 120 KB costs about 30 ms)."""


def secret_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Where ``text[start:end]`` holds a secret or a mask of one: (start, end)
    character offsets in ``text``."""
    part = text[start:end]
    spans = [(m.start + start, m.end + start) for m in default_redactor().find(part)]
    spans += [(m.start() + start, m.end() + start) for m in _MASK.finditer(part)]
    return spans


def around_secrets(text: str, head: str, tail: str) -> tuple[str, str]:
    """``head`` (a prefix of ``text``) and ``tail`` (a suffix) with neither cut inside
    a secret: a head that would end inside one ends before it, a tail that would
    start inside one starts after it."""
    if head and text.startswith(head):
        cut = _moved(text, len(head), backwards=True)
        head = text[:cut]
    if tail and text.endswith(tail):
        cut = _moved(text, len(text) - len(tail), backwards=False)
        tail = text[cut:]
    return head, tail


def _moved(text: str, cut: int, *, backwards: bool) -> int:
    """``cut`` moved to the edge of every secret it falls inside (they may overlap)."""
    spans = secret_spans(text, max(0, cut - NEAR), cut + NEAR)
    moved = True
    while moved:
        moved = False
        for start, end in spans:
            if start < cut < end:
                cut = start if backwards else end
                moved = True
    return cut
