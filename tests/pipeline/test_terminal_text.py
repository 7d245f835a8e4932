"""Text from models, tools and sessions reaches a terminal without escape sequences
and without bidirectional controls (issue 27: U+202E reordered `sessions list/view`
and `ollm files`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.terminal_text import has_control, strip_control

BIDI = [chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]]


@given(st.text(alphabet=st.sampled_from([*BIDI, "a", "b", "\x1b", "[", "2", "J", "\n", "é"])))
def test_property_stripped_text_has_no_bidi_control(text: str) -> None:
    cleaned = strip_control(text)
    assert not any(c in cleaned for c in BIDI)
    assert not has_control(cleaned)
    assert strip_control(cleaned) == cleaned


def test_each_bidi_control_is_stripped_and_other_text_kept() -> None:
    for char in BIDI:
        assert strip_control(f"invoice{char}fdp.exe") == "invoicefdp.exe"
        assert has_control(char)
    assert strip_control("naïve עברית\ttext\n") == "naïve עברית\ttext\n"
    assert not has_control("naïve עברית")


def test_ollm_files_on_a_terminal_shows_no_reordering(tmp_path: Path) -> None:
    """On a real terminal (a pty) the name is shown with the control escaped."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "invoice\u202efdp.exe").write_text("")
    (root / "plain.txt").write_text("")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OLLM_")},
        "OLLM_HOME": str(tmp_path / "home"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-c", "from ollm_cli.cli.app import main; main()", "files"],
        cwd=str(root),
        env=env,
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    shown = child.before
    assert "\u202e" not in shown
    assert "invoice\\u202efdp.exe" in shown and "plain.txt" in shown
