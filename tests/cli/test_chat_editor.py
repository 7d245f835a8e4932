"""The chat's line editor in a real pseudo-terminal, on every runtime a user can
choose: history recalled with the up arrow and kept private and redacted on disk,
a bracketed paste of many lines as one message, Alt-Enter and a trailing ``\\``
for multi-line messages, Ctrl-L, Tab completion of commands and session ids,
Ctrl-D leaving with the command that resumes, and an approval answered "always".
"""

from __future__ import annotations

import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.cli.conftest import ollm_env, shared_for
from tests.cli.test_run_cmd import OLLM, RUNTIMES, sessions
from tests.fake_ollama import FakeOllama, Reply

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
UP, ALT_ENTER, CTRL_L, TAB, ENTER = "\x1b[A", "\x1b\r", "\x0c", "\t", "\r"
_REDRAW = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"


def drawn(text: str) -> str:
    """A pattern of ``text`` as the line editor draws it: what was typed, then the
    completed part, may come in two screen updates, with escape sequences (cursor,
    wrap and style switches) between them."""
    return _REDRAW.join(re.escape(char) for char in text)


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        fake.default_reply = _echo
        yield fake


def _echo(body: dict[str, Any]) -> Reply:
    last = str(body["messages"][-1].get("content", ""))
    if last.startswith("Write a title"):
        return Reply.text("A title")
    return Reply.text(f"echo({len(last)}): {last[:20]!r}")


@pytest.fixture(params=RUNTIMES)
def env(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    runtime = str(request.param)
    with ollm_env(
        runtime,
        server.url,
        ollm_home,
        tmp_path,
        shared=shared_for(request, runtime),
        TERM="xterm",
        # room for the 30,000-character paste in the window OLLM asks for
        OLLM_PROVIDER__OLLAMA__MAX_CONTEXT_WINDOW="32768",
    ) as values:
        yield values


def spawn(env: dict[str, str], cwd: Path, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run", *args],
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=90,
        dimensions=(40, 100),
    )
    child.expect("› ")
    return child


def send_all(child: pexpect.spawn, text: str) -> None:
    """Write ``text`` whole (a pty takes a large write in pieces)."""
    for start in range(0, len(text), 1024):
        child.send(text[start : start + 1024])


def user_messages(ollm_home: Path) -> list[str]:
    store = sessions(ollm_home)
    try:
        found: list[str] = []
        for summary in store.list_sessions():
            session = store.get_session(summary.session_id)
            found.extend(m.text for m in session.messages if m.role == "user")
        return found
    finally:
        store.close()


def test_the_line_editor_in_a_terminal(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    first = subprocess.run(
        [*OLLM, "run", "-p", "an earlier session"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr
    [earlier] = sessions_ids(ollm_home)
    paste = "\n".join(f"line {n:04d} of the pasted text, {'x' * 20}" for n in range(600))
    assert len(paste) > 30_000

    child = spawn(env, tmp_path)
    try:
        # a message with a secret, then recalled with the up arrow and sent again
        child.send(f"my token is {SECRET}{ENTER}")
        child.expect_exact("echo(52)")
        child.expect("› ")
        child.send(UP + ENTER)
        child.expect_exact("echo(52)")
        child.expect("› ")
        # Alt-Enter and a trailing backslash go on to a new line; Enter sends the whole
        child.send(f"first line{ALT_ENTER}second line{ENTER}")
        child.expect_exact("echo(22): 'first line\\nsecond l")
        child.expect("› ")
        child.send(f"go on\\{ENTER}here{ENTER}")
        child.expect_exact("echo(10): 'go on\\nhere'")
        child.expect("› ")
        # Ctrl-L clears the screen and is not part of the message
        child.send(CTRL_L)
        child.expect_exact("\x1b[2J")
        child.expect("› ")  # drawn again at the top
        child.send(f"after clearing{ENTER}")
        child.expect("› ")  # the next prompt, not the redraw of the accepted line
        assert "echo(14): 'after clearing'" in (child.before or "")
        # a bracketed paste of 600 lines is one message
        send_all(child, PASTE_START + paste + PASTE_END)
        child.send(ENTER)
        child.expect_exact(f"echo({len(paste)}): 'line 0000 of the pas'")
        child.expect("› ")
        # Tab completes the command, then the session id
        child.send(f"/res{TAB}")
        child.expect(drawn("/resume"))
        child.send(f" {earlier[:3]}{TAB}")
        child.expect(drawn(earlier[:8]))
        child.send(ENTER)
        child.expect_exact(f"resumed {earlier[:8]}")
        child.expect("› ")
        child.sendeof()
        child.expect_exact(f"ollm run --resume {earlier[:8]}")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before

    typed = f"my token is {SECRET}"
    sent = [r["messages"][-1]["content"] for r in server.chat_requests]
    assert sent.count(typed) == 2  # the model got what was typed, recalled too
    users = user_messages(ollm_home)
    assert paste in users  # byte for byte
    assert "first line\nsecond line" in users and "go on\nhere" in users
    assert "after clearing" in users

    history = ollm_home / "chat-history"
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    assert stat.S_IMODE(history.parent.stat().st_mode) == 0o700
    kept = history.read_text()
    assert SECRET not in kept and "my token is [REDACTED" in kept
    assert "after clearing" in kept


def sessions_ids(ollm_home: Path) -> list[str]:
    store = sessions(ollm_home)
    try:
        return [str(s.session_id) for s in store.list_sessions()]
    finally:
        store.close()
