"""``ollm run -p``'s own lines on stderr (the session, the notices) without rich where
rich would write them plainly: in a pipe or a file, unless a variable makes rich take
stderr for a terminal."""

from __future__ import annotations

import io
import sys

import pytest

from ollm_cli.cli import one_shot, output
from ollm_cli.cli.consoles import SafeConsole


class _Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)


LINES = [
    "session 3f1c2a9e",
    "⚠ the model called shell, which was not run (-p asks nobody); --allow-tools shell "
    "or --approve auto lets it run, a line longer than any terminal is wide " * 2,
    "a [bold]markup-like[/] text\tand a tab",
]


@pytest.mark.parametrize("line", LINES)
def test_a_line_in_a_pipe_is_what_rich_wrote_there(
    line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = _Pipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    assert output.stderr_is_plain()
    one_shot._say(line, "yellow")
    by_rich = _Pipe()
    SafeConsole(file=by_rich, highlight=False, emoji=False).print(
        line, style="yellow", markup=False, soft_wrap=True
    )
    assert pipe.getvalue() == by_rich.getvalue()


def test_an_escape_sequence_never_reaches_the_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Rich dropped the BEL that ends an OSC sequence first, then the rest of the line
    with the sequence it no longer saw end; the line here keeps it.)"""
    pipe = _Pipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    one_shot._say("⚠ the model called \x1b]0;owned\x07shell\x1b[2J, which was not run", "yellow")
    assert pipe.getvalue() == "⚠ the model called shell, which was not run\n"


@pytest.mark.parametrize(("variable", "value"), [("FORCE_COLOR", "1"), ("TTY_COMPATIBLE", "1")])
def test_a_variable_that_makes_rich_style_a_pipe_leaves_it_to_rich(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", _Pipe())
    monkeypatch.setenv(variable, value)
    assert not output.stderr_is_plain()


def test_a_terminal_gets_the_line_styled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert not output.stderr_is_plain()
    shown = io.StringIO()
    monkeypatch.setattr(output.err_console, "_file", shown)  # "file" would pin sys.stderr after
    monkeypatch.setattr(output.err_console, "_force_terminal", True)
    monkeypatch.setattr(output.err_console, "_color_system", None)
    monkeypatch.setenv("NO_COLOR", "")
    one_shot._say("session 3f1c2a9e", "dim")
    assert "session 3f1c2a9e" in shown.getvalue()


def test_without_stderr_the_run_goes_on_as_rich_lets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ollm run -p ... 2>&-``: Python has no ``sys.stderr``; rich writes nowhere."""
    monkeypatch.setattr(sys, "stderr", None)
    assert not output.stderr_is_plain()
    one_shot._say("session 3f1c2a9e", "dim")
    closed = io.StringIO()
    closed.close()  # its isatty() raises
    monkeypatch.setattr(sys, "stderr", closed)
    assert not output.stderr_is_plain()
