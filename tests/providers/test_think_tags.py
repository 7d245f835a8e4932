"""Reasoning inlined as ``<think>…</think>`` is split from the answer however the
stream cuts it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.providers._think_tags import ThinkTagSplitter


def split_all(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkTagSplitter()
    answer, thinking = [], []
    for piece in pieces:
        a, t = splitter.feed(piece)
        answer.append(a)
        thinking.append(t)
    a, t = splitter.flush()
    return "".join(answer) + a, "".join(thinking) + t


def test_reasoning_in_tags_is_kept_apart_from_the_answer() -> None:
    assert split_all(["<think>Two and two.</think>\n\nFour."]) == ("Four.", "Two and two.")
    assert split_all(["<thi", "nk>a", "b</th", "ink>", "\n", "\nc"]) == ("c", "ab")
    assert split_all(["no reasoning here"]) == ("no reasoning here", "")
    assert split_all(["a < b and <thin"]) == ("a < b and <thin", "")
    assert split_all(["<think>cut off"]) == ("", "cut off")


_TEXT = st.text(alphabet="ab <>/thinkg\n", max_size=30).filter(
    lambda t: "<think>" not in t and "</think>" not in t
)


@given(
    before=_TEXT,
    reasoning=_TEXT,
    after=_TEXT.map(lambda t: t.lstrip("\n")),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_any_cut_of_the_stream_gives_the_same_split(
    before: str, reasoning: str, after: str, cuts: list[int]
) -> None:
    whole = f"{before}<think>{reasoning}</think>{after}"
    points = sorted({min(c, len(whole)) for c in cuts})
    pieces = [whole[i:j] for i, j in zip([0, *points], [*points, len(whole)], strict=True)]
    assert split_all(pieces) == (before + after, reasoning)
