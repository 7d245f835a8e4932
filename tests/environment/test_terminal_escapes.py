"""Escape sequences from a hostile imported session or answer never reach the terminal.

A title or a message holding OSC 52 (write the clipboard), OSC 0 (retitle the
window) or CSI 2J (clear the screen) is printed by every command with the
sequence stripped; Markdown exports are clean; ``sessions title`` refuses them.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from ollm_cli.cli import output
from ollm_cli.cli.output import SafeConsole, strip_control
from ollm_cli.cli.state import loaded_settings
from ollm_cli.pipeline.errors import SessionError
from ollm_cli.pipeline.recording import ChatRecordingService, ExportFormat, render
from ollm_cli.pipeline.records import SessionMessage, TextPart
from tests.cli.conftest import invoke
from tests.cli.session_strategies import iso, make_session

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
RETITLE = "\x1b]0;pwned\x1b\\"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
HOSTILE = f"Deploy{CLIPBOARD} notes{RETITLE}{CLEAR}{C1_CSI}"
SID = "aaaa1111-0000-4000-8000-000000000001"


def _assert_clean(text: str) -> None:
    for bad in ("\x1b", "\x07", "\x9b", "52;c;", "0;pwned"):
        assert bad not in text, repr(text)


@pytest.fixture
def hostile_session(ollm_home: Path) -> str:
    messages = [
        SessionMessage(role="user", parts=[TextPart(text=f"hi {CLEAR}there")], timestamp=iso(1)),
        SessionMessage(
            role="assistant",
            parts=[TextPart(text=f"answer {CLIPBOARD}{RETITLE}")],
            timestamp=iso(2),
        ),
    ]
    session = make_session(messages, title=HOSTILE, session_id=SID)
    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        return store.import_session(session)
    finally:
        store.close()


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["view", "aaaa1111"],
        ["view", "aaaa1111", "--full"],
        ["search", "answer"],
        ["search", "Deploy"],
        ["export", "aaaa1111", "--format", "markdown"],
    ],
)
def test_every_printing_command_strips_escape_sequences(
    hostile_session: str, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer = io.StringIO()
    # the real console of the commands, writing to a terminal-like buffer
    monkeypatch.setattr(output.console, "_file", buffer)  # "file" would pin sys.stdout after
    monkeypatch.setattr(output.console, "_force_terminal", True)
    out = invoke(*args)
    assert out.exit_code == 0, out.stderr
    shown = out.stdout + buffer.getvalue()
    assert "Deploy" in shown or "answer" in shown or "hi" in shown
    plain = shown.replace("\x1b[", "<CSI>")  # rich's own styling is allowed
    for bad in ("\x07", "\x9b", "52;c;", "0;pwned", "<CSI>2J"):
        assert bad not in plain, repr(shown)


def test_markdown_export_is_clean(hostile_session: str) -> None:
    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        session = store.get_session(hostile_session)
    finally:
        store.close()
    markdown = render(session, ExportFormat.MARKDOWN)
    _assert_clean(markdown)
    assert "Deploy" in markdown and "answer" in markdown


def test_sessions_title_refuses_control_characters(hostile_session: str) -> None:
    out = invoke("title", "aaaa1111", f"nice{RETITLE}")
    assert out.exit_code != 0
    assert "control characters" in out.stderr
    settings = loaded_settings().settings
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        with pytest.raises(SessionError, match="control"):
            store.set_title(hostile_session, "bell\x07")
    finally:
        store.close()


def test_a_plain_rich_console_would_have_passed_them() -> None:
    """The attack is real: rich alone keeps ESC in text."""
    buffer = io.StringIO()
    clipboard = "\x1b]52;c;cm0gLXJmIH4=\x1b\\"  # OSC 52 ended by ST (rich drops BEL)
    Console(file=buffer, force_terminal=True).print(Text(clipboard + "x"))
    assert "\x1b]52" in buffer.getvalue()
    safe = io.StringIO()
    SafeConsole(file=safe, force_terminal=True).print(Text(clipboard + "x"))
    assert "\x1b]52" not in safe.getvalue() and "x" in safe.getvalue()


def test_rich_styles_still_show_on_a_safe_console() -> None:
    buffer = io.StringIO()
    SafeConsole(file=buffer, force_terminal=True, color_system="standard").print("[red]x[/]")
    assert "\x1b[31m" in buffer.getvalue()


def test_write_stdout_strips(capsys: pytest.CaptureFixture[str]) -> None:
    output.write_stdout(f"answer{CLIPBOARD}\n")
    assert capsys.readouterr().out == "answer\n"


@given(st.text())
def test_strip_control_leaves_no_control_character(text: str) -> None:
    cleaned = strip_control(text)
    assert not any((ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in cleaned)
    assert strip_control(cleaned) == cleaned


@given(st.text(alphabet=st.characters(exclude_categories=["Cc"])))
def test_text_without_controls_is_unchanged(text: str) -> None:
    assert strip_control(text) == text
