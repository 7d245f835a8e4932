"""Reasoning inlined in the answer as ``<think>…</think>``, split off as it streams.

Ollama streams a thinking model's reasoning apart (``message.thinking``); many
other servers (and Ollama itself when thinking is not requested) put it in the
answer text between ``<think>`` and ``</think>``. :class:`ThinkTagSplitter`
takes the answer's pieces as they arrive and hands back ``(answer, thinking)``
for each, holding back only the few characters that may be the start of a tag
split across two pieces.

Example::

    splitter = ThinkTagSplitter()
    splitter.feed("<think>Two and tw")      # ("", "Two and tw")
    splitter.feed("o.</thi")                # ("", "o.")
    splitter.feed("nk>4")                   # ("4", "")
    splitter.flush()                        # ("", "")
"""

from __future__ import annotations

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


def _partial_tag_length(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that begins ``tag`` (a tag cut in two)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkTagSplitter:
    """Splits streamed text into answer and reasoning at ``<think>`` tags."""

    def __init__(self) -> None:
        self._inside = False
        self._held = ""
        self._after_close = False  # newlines right after ``</think>`` are not answer text

    @property
    def inside(self) -> bool:
        """Whether the text so far ends inside an open ``<think>``."""
        return self._inside

    def feed(self, piece: str) -> tuple[str, str]:
        """The answer text and the reasoning text that ``piece`` completes."""
        text = self._held + piece
        self._held = ""
        answer: list[str] = []
        thinking: list[str] = []
        while text:
            if self._after_close and not self._inside:
                text = text.lstrip("\n")
                if not text:
                    break
                self._after_close = False
            tag = CLOSE_TAG if self._inside else OPEN_TAG
            out = thinking if self._inside else answer
            at = text.find(tag)
            if at >= 0:
                out.append(text[:at])
                text = text[at + len(tag) :]
                self._inside = not self._inside
                self._after_close = not self._inside
                continue
            keep = _partial_tag_length(text, tag)
            out.append(text[: len(text) - keep])
            self._held = text[len(text) - keep :]
            break
        return "".join(answer), "".join(thinking)

    def flush(self) -> tuple[str, str]:
        """What was held back at the end of the stream (a tag that never completed)."""
        held, self._held = self._held, ""
        return ("", held) if self._inside else (held, "")
