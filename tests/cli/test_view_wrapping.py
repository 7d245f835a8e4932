"""``ollm sessions view`` never cuts: every word of every part, wrapped to the width, in
a pipe and on a terminal; reasoning whole; interrupted answers marked."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

import pexpect
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from ollm_cli.cli.sessions._view import wrapped
from ollm_cli.pipeline.recording import INTERRUPTED_NOTE
from ollm_cli.pipeline.records import SessionMessage, TextPart, ThinkingPart
from tests.cli.conftest import OLLM_SCRIPT, REPO, run_ollm
from tests.cli.session_strategies import iso, make_session

Seed = Callable[..., list[str]]
SESSION_ID = "5e5510a0-aaaa-4bbb-8ccc-0123456789ab"
PARAGRAPH = " ".join(f"word{n:03d}" for n in range(120))  # about 1,000 characters
REASONING = " ".join(f"thought{n:04d}" for n in range(450))  # about 5,000 characters
WIDTH = 40


def _seed_long_session(seed: Seed) -> None:
    cut = SessionMessage.model_validate(
        {**SessionMessage.assistant("Half an answer, cut").to_dict(), "interrupted": True}
    ).model_copy(update={"timestamp": iso(3)})
    seed(
        make_session(
            [
                SessionMessage(role="user", parts=[TextPart(text=PARAGRAPH)], timestamp=iso(1)),
                SessionMessage(
                    role="assistant",
                    parts=[ThinkingPart(text=REASONING, tokens=900), TextPart(text="Done.")],
                    timestamp=iso(2),
                ),
                cut,
            ],
            title="A title much longer than forty columns, which must wrap and not be cut",
            session_id=SESSION_ID,
        )
    )


def _words(text: str) -> list[str]:
    return re.findall(r"(?:word|thought)\d+", text)


def _assert_everything_shown(screen: str) -> None:
    lines = screen.replace("\r\n", "\n").split("\n")
    assert all(cell_len(line.rstrip()) <= WIDTH for line in lines), screen
    assert "…" not in screen
    shown = _words(screen)
    assert shown == _words(PARAGRAPH) + _words(REASONING)  # every word, in order
    assert "reasoning (900 tokens)" in screen
    flat = " ".join(re.sub("[\u2500-\u257f]", " ", screen).split())  # borders out
    assert "which must wrap and not be cut" in flat
    assert "assistant interrupted" in flat
    assert flat.index("Half an answer, cut") < flat.index(INTERRUPTED_NOTE)


def test_view_in_a_pipe_at_40_columns_shows_every_word(seed: Seed) -> None:
    _seed_long_session(seed)
    for args in (["view", SESSION_ID[:8]], ["view", SESSION_ID[:8], "--full"]):
        out = run_ollm(*args, env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"})
        assert out.returncode == 0, out.stderr
        _assert_everything_shown(out.stdout)


def test_view_on_a_terminal_at_40_columns_shows_every_word(seed: Seed) -> None:
    _seed_long_session(seed)
    child = pexpect.spawn(
        sys.executable,
        ["-c", OLLM_SCRIPT, "sessions", "view", SESSION_ID[:8]],
        cwd=str(REPO),
        env={**os.environ, "NO_COLOR": "1", "TERM": "xterm", "PAGER": "cat"},
        encoding="utf-8",
        timeout=60,
        dimensions=(30, WIDTH),
    )
    child.expect(pexpect.EOF)
    screen = child.before
    child.close()
    assert child.exitstatus == 0, screen
    _assert_everything_shown(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen))


@given(
    st.text(alphabet=st.sampled_from("ab 日\t-"), max_size=80),
    st.integers(min_value=1, max_value=30),
)
@settings(max_examples=200)
def test_wrapped_pieces_fit_and_keep_every_word(line: str, width: int) -> None:
    line = line.expandtabs(8)
    pieces = list(wrapped(line, max(width, 2)))
    assert all(cell_len(piece) <= max(width, 2) for piece in pieces)
    assert "".join("".join(pieces).split()) == "".join(line.split())
    if cell_len(line) <= max(width, 2):
        assert pieces == [line]
