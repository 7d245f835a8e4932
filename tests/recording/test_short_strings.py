"""``ShortStrings``: any JSON comes out as JSON with every string cut to a bound of the
file's bytes, never inside an escape, a surrogate pair or a UTF-8 character, whatever
the size of the reads; strings within the bound come out as they went in."""

from __future__ import annotations

import io
import json
from typing import Any

import ijson
import orjson
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.recording._stream import ShortStrings

strings = st.text(
    alphabet=st.characters(codec="utf-8")  # no lone surrogate: UTF-8 has none
    | st.sampled_from(['"', "\\", "\n", "\x00", "é", "😀", "\u2028"]),
    max_size=40,
)
keys = st.text(alphabet="abcdef", max_size=4)
documents = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def encoded(value: Any, ascii_only: bool) -> bytes:
    """``value`` as a JSON file may hold it: UTF-8, or every non-ASCII character escaped
    (surrogate pairs for the characters beyond the first plane)."""
    if ascii_only:
        return json.dumps(value, ensure_ascii=True).encode()
    return orjson.dumps(value)


def string_size(text: str, ascii_only: bool) -> int:
    """The bytes ``text`` takes inside the quotes of a JSON file written as ``encoded`` does."""
    return len(encoded(text, ascii_only)) - 2


def check(before: Any, after: Any, limit: int, ascii_only: bool) -> None:
    """``after`` is ``before`` with each string a prefix of its own, whole when it fits."""
    if isinstance(before, str):
        assert isinstance(after, str) and before.startswith(after)
        if string_size(before, ascii_only) <= limit:
            assert after == before
        else:
            assert string_size(after, ascii_only) <= limit
    elif isinstance(before, dict):
        assert isinstance(after, dict) and after.keys() == before.keys()
        for key in before:
            check(before[key], after[key], limit, ascii_only)
    elif isinstance(before, list):
        assert isinstance(after, list) and len(after) == len(before)
        for one, other in zip(before, after, strict=True):
            check(one, other, limit, ascii_only)
    else:
        assert after == before


@given(
    documents,
    st.integers(4, 60),
    st.integers(1, 50),
    st.integers(1, 70),
    st.booleans(),
)
def test_property_every_string_is_cut_to_the_bound_and_the_json_stays_whole(
    document: Any, limit: int, chunk: int, read: int, ascii_only: bool
) -> None:
    raw = encoded(document, ascii_only)
    stream = ShortStrings(io.BytesIO(raw), limit, chunk=chunk)
    pieces = []
    while piece := stream.read(read):
        assert len(piece) <= read
        pieces.append(piece)
    out = b"".join(pieces)
    check(document, json.loads(out), limit, ascii_only)


def test_a_string_of_sixty_megabytes_is_read_as_its_first_bytes() -> None:
    big = {"messages": [{"parts": [{"type": "text", "text": "zyx " + "a\\n" * 30_000_000}]}]}
    raw = orjson.dumps(big).replace(b"\\\\n", b"\\n")
    assert len(raw) > 60_000_000
    stream = ShortStrings(io.BytesIO(raw), 1000)
    [text] = [v for p, e, v in ijson.parse(stream) if e == "string" and p.endswith(".text")]
    assert text.startswith("zyx a\na\n") and len(text) <= 1000
    assert stream.cut == 1


def test_an_escaped_quote_is_not_the_end_of_a_string() -> None:
    raw = b'{"a": "say \\"hi\\" \\\\", "b": "' + b"x" * 50 + b'", "c": 1}'
    out = json.loads(ShortStrings(io.BytesIO(raw), 10, chunk=3).read())
    assert out == {"a": 'say "hi"', "b": "x" * 10, "c": 1}  # 10 bytes of the file each
