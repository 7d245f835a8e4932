"""A message larger than the model's window, through the local service (the default
runtime): refused with the sizes and exit code 2, nothing sent or recorded; cut
with ``--truncate-prompt``, said on stderr and in ``--json``, recorded as sent."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.fake_ollama import FakeOllama
from tests.service.conftest import ollm, service_env, store_of

pytestmark = pytest.mark.ray

HUGE = " ".join(f"sentence {n} of a very long pasted document." for n in range(1000))


def _user_texts(home: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with store_of(home, monkeypatch) as store:
        return [
            m.text
            for summary in store.list_sessions()
            for m in store.get_session(summary.session_id).messages
            if m.role == "user"
        ]


def _asked(server: FakeOllama, text: str) -> list[str]:
    return [
        str(r["messages"][-1].get("content", ""))
        for r in server.chat_requests
        if str(r["messages"][-1].get("content", "")).startswith(text)
    ]


def test_a_prompt_larger_than_the_window_is_refused_then_cut_with_consent_in_the_service(
    shared_home: Path, server: FakeOllama, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = service_env(shared_home, server)
    refused = ollm("run", "-p", HUGE, "--json", env=env, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    error = orjson.loads(refused.stderr.strip().splitlines()[-1])
    assert error["type"] == "PromptTooLargeError"
    assert "the model's window is 4096 tokens" in error["error"]
    assert "--truncate-prompt" in error["hint"]
    assert _asked(server, "sentence 0 of") == []
    assert HUGE not in _user_texts(shared_home, monkeypatch)

    cut = ollm("run", "-p", HUGE, "--truncate-prompt", "--json", env=env, cwd=tmp_path)
    assert cut.returncode == 0, cut.stderr
    result = orjson.loads(cut.stdout)
    assert "--truncate-prompt" in result["notices"][0]
    assert "cut out" in " ".join(cut.stderr.split())
    [sent] = _asked(server, "sentence 0 of")
    assert "tokens left out ...]" in sent and len(sent) < len(HUGE)
    assert sent in _user_texts(shared_home, monkeypatch)  # recorded as it was sent
