"""The translated patterns match as git's wildmatch does, and never backtrack without
end (issue 27: ``a*a*a*a*a*a*a*a*a*a*a*a*a*b`` in a ``.gitignore`` pinned a core).

The reference below is git's ``dowild`` (WM_PATHNAME) written plainly, with
memoisation so that it stays polynomial on the small inputs hypothesis makes.
"""

from __future__ import annotations

import re
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from ollm_cli.config.ignore_syntax import translate
from ollm_cli.pipeline.discovery._ignore_rules import CHUNK_CHARS, RuleSet

CATASTROPHIC = "a*a*a*a*a*a*a*a*a*a*a*a*a*b"


def wildmatch(pattern: str, text: str) -> bool:
    """git's wildmatch in WM_PATHNAME mode, for ``a``, ``b``, ``/``, ``*``, ``?`` and
    classes of those letters and ranges (``[ab]``, ``[!a]``, ``[a-b]``, ``[b-a]``)."""
    end = len(pattern)

    @cache
    def match(i: int, j: int) -> bool:
        if i == end:
            return j == len(text)
        char = pattern[i]
        if char == "*":
            k = i
            while k < end and pattern[k] == "*":
                k += 1
            boundary = i == 0 or pattern[i - 1] == "/"
            if k - i >= 2 and boundary and k == end:
                return True
            if k - i >= 2 and boundary and pattern[k] == "/":
                # "**/": no directory, or any run of them ending at a "/"
                return match(k + 1, j) or any(
                    text[at] == "/" and match(k + 1, at + 1) for at in range(j, len(text))
                )
            for at in range(j, len(text) + 1):
                if match(k, at):
                    return True
                if at < len(text) and text[at] == "/":
                    return False
            return False
        if j == len(text):
            return False
        got = text[j]
        if char == "[":
            close = pattern.index("]", i + 2)
            members = pattern[i + 1 : close]
            negated = members.startswith("!")
            return (
                got != "/"
                and in_class(members[negated:], got) != negated
                and match(close + 1, j + 1)
            )
        if char == "?":
            return got != "/" and match(i + 1, j + 1)
        return got == char and match(i + 1, j + 1)

    return match(0, 0)


def in_class(members: str, got: str) -> bool:
    """git's class loop: each character is compared as itself first; a ``-`` after
    one makes a range from it (so ``[b-a]`` holds ``b``, its empty range nothing)."""
    inside = False
    low: str | None = None
    k = 0
    while k < len(members):
        char = members[k]
        if char == "-" and low is not None and k + 1 < len(members):
            inside = inside or low <= got <= members[k + 1]
            low = None
            k += 2
            continue
        inside = inside or got == char
        low = char
        k += 1
    return inside


PIECES = st.sampled_from(
    ["a", "b", "/", "*", "**", "?", "[ab]", "[!a]", "a", "b", "[a-b]", "[b-a]", "[!b-a]", "[b-a-b]"]
)


@st.composite
def patterns(draw: st.DrawFn) -> str:
    pattern = "".join(draw(st.lists(PIECES, min_size=1, max_size=9))).strip("/")
    return pattern or "a"


TEXTS = st.text(alphabet="ab/", max_size=12)


@settings(max_examples=600)
@given(patterns(), TEXTS)
def test_translation_matches_like_git(pattern: str, text: str) -> None:
    found = re.fullmatch(f"(?s:{translate(pattern)})", text) is not None
    assert found == wildmatch(pattern, text), (pattern, text, translate(pattern))


@settings(max_examples=300)
@given(st.lists(patterns(), min_size=1, max_size=5), TEXTS)
def test_a_rule_set_picks_the_last_matching_rule(lines: list[str], text: str) -> None:
    rules = RuleSet.from_lines([f"/{line}" for line in lines])
    expected = next(
        (True for line in reversed(lines) if wildmatch(line, text)),
        None,
    )
    assert rules.match(text, text.rpartition("/")[2], False) == expected


def test_the_catastrophic_pattern_returns() -> None:
    # a plain regex translation tries every way to share the a's among 13 stars
    rules = RuleSet.from_lines([CATASTROPHIC, f"/x/**/{CATASTROPHIC}/**/y"])
    long_name = "a" * 5000
    assert rules.match(long_name, long_name, False) is None
    assert rules.match(long_name + "b", long_name + "b", False) is True
    deep = "x/" + "/".join(["a" * 40] * 60) + "/y"
    assert rules.match(deep, "y", False) is None
    assert wildmatch(CATASTROPHIC, "a" * 30) is False


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(blacklist_characters="*?[\\"), min_size=1), TEXTS)
def test_a_fixed_pattern_matches_itself_alone(pattern: str, text: str) -> None:
    # Fixed patterns (most lines of a large .gitignore) skip the tokenizer: each
    # character, "/" included, stands for itself.
    regex = re.compile(f"(?s:{translate(pattern)})")
    assert regex.fullmatch(pattern) is not None
    assert (regex.fullmatch(text) is not None) == (text == pattern)
    assert (regex.fullmatch(pattern + "a") is not None) is False


@settings(max_examples=200, deadline=None)
@given(st.lists(patterns(), min_size=1, max_size=8), st.lists(TEXTS, min_size=1, max_size=6))
def test_a_large_rule_set_compiled_in_parts_picks_the_last_matching_rule(
    lines: list[str], texts: list[str]
) -> None:
    """A rule set larger than one regex part (``CHUNK_CHARS``: a hostile file's
    megabyte of patterns is compiled a part at a time, the most recent first) still
    picks git's winner: long filler patterns that match none of the texts put each
    rule in a part of its own, and a rule repeated is compiled once, as its last line."""
    filler = "q" * (CHUNK_CHARS // 3)
    padded: list[str] = []
    for number, line in enumerate(lines):
        padded += [f"/{filler}{number}*", f"/{filler}{number}?", f"/{line}"]
    rules = RuleSet.from_lines(padded)
    for text in texts:
        expected = next((True for line in reversed(lines) if wildmatch(line, text)), None)
        assert rules.match(text, text.rpartition("/")[2], False) == expected, (lines, text)
