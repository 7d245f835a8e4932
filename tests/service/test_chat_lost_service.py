"""The chat, in a terminal, when the local service dies under it: it ends at once with
exit 8 and the command that resumes the session (before, it stayed at its prompt and
failed every later message with the same error), and that command works."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pexpect
import pytest

from tests.fake_ollama import FakeOllama
from tests.service.conftest import OLLM, Router, ollm, service_env, state_of, store_of, wait_for


def _at_model(server: FakeOllama, text: str) -> bool:
    return any(
        text in str(request["messages"][-1].get("content", "")) for request in server.chat_requests
    )


def test_the_chat_ends_with_exit_8_when_the_service_dies_and_its_session_resumes(
    server: FakeOllama, router: Router, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = service_env(home, server)
    child = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 250),  # the hint on one line
    )
    try:
        child.expect("› ")
        child.sendline("[gate:chatlost] are you there?")
        wait_for(lambda: _at_model(server, "[gate:chatlost]"), what="the turn at the model")
        state = state_of(home)
        assert state is not None
        os.kill(state.pid, signal.SIGKILL)  # the service dies mid-answer
        child.expect("OLLM service stopped while serving")
        child.expect(r"resume this session with: ollm run --resume (\w+)")
        short_id = child.match.group(1)
        child.expect(pexpect.EOF)  # the chat ended: no prompt that fails every message
    finally:
        router.gate("chatlost").set()
        child.close()
    assert child.exitstatus == 8, child.before
    assert "Traceback" not in (child.before or "")
    (session,) = store_of(home, monkeypatch).list_sessions()
    assert session.session_id.startswith(short_id)
    # what the hint says works: the next command starts a new service and resumes it
    again = ollm("run", "--resume", short_id, "-p", "back again", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "echo: back again" in again.stdout
    texts = [m.text for m in store_of(home, monkeypatch).get_session(session.session_id).messages]
    assert "[gate:chatlost] are you there?" in texts and "back again" in texts
    stopped = ollm("service", "stop", env=env, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
