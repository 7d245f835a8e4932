"""Repeated replies: the same or a near-identical text turn after turn.

The same or a near-identical text (similarity >= ``outputSimilarity``, see
:func:`similarity`) ``repeatThreshold`` times in a row, with the same tool
calls and results in between, is a loop; a similar text that goes with new
calls or new results narrates progress.
"""

from __future__ import annotations

from collections import deque

from ollm_cli.config.settings import LoopDetectionSettings
from ollm_cli.pipeline.loop_detection._event import LoopEvent, Verdicts

#: How much of each output the similarity measure reads (head and tail).
OUTPUT_SAMPLE_CHARS = 2000


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


class Output:
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
    return _similarity(Output(a, 0), Output(b, 0), 1.0)


def _sample(text: str) -> str:
    if len(text) <= OUTPUT_SAMPLE_CHARS:
        return text
    half = OUTPUT_SAMPLE_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def _similarity(x: Output, y: Output, enough: float) -> float:
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


class OutputDetector:
    """The model's texts of one request: the last two, and how long the run of alike ones is."""

    def __init__(self, settings: LoopDetectionSettings, verdicts: Verdicts) -> None:
        self.settings = settings
        self.verdicts = verdicts
        self.outputs: deque[Output] = deque(maxlen=2)
        self.output_run = 0

    def record(self, text: str, calls: int, poll: bool) -> LoopEvent | None:
        """Record the model's text for one turn (``calls``: a digest of the calls and
        results since the previous text; ``poll``: one of them polls); near-identical
        repeats with the same calls in between are a loop."""
        current = Output(text, calls)
        previous = self.outputs[-1] if self.outputs else None
        threshold = self.settings.output_similarity
        if (
            previous is not None
            and previous.calls == current.calls
            and _similarity(previous, current, threshold) >= threshold
        ):
            self.output_run += 1
        else:
            self.output_run = 1
        self.outputs.append(current)
        bar = self.verdicts.poll_bar() if poll else self.settings.repeat_threshold
        if self.output_run >= bar:
            return self.verdicts.report(
                "repeated-output",
                self.output_run,
                text,
                f"the same or a near-identical reply {self.output_run} times in a row "
                f"(similarity >= {self.settings.output_similarity})",
                poll=poll,
            )
        return None
