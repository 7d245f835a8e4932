"""What the user says is never cut silently: a message larger than the model's window
is refused (exit code 2, the sizes named, nothing sent or recorded) or, with
``--truncate-prompt``, cut and said so; messages left out of a request to fit the
window are said in the chat and in ``--json``; the status line counts what was sent."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from tests.fake_ollama import FakeModel, FakeOllama, Reply

MODEL = "llama3.2:latest"
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
WINDOW = 4096
HUGE = " ".join(f"sentence {n} of a very long pasted document." for n in range(1000))


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama(models=[FakeModel(name=MODEL, context_length=WINDOW)]) as fake:
        fake.default_reply = lambda body: Reply.text("understood")
        yield fake


@pytest.fixture
def env(server: FakeOllama, ollm_home: Path) -> dict[str, str]:
    values = dict(os.environ)
    values.update(
        {
            "OLLM_HOME": str(ollm_home),
            "OLLM_PROVIDER": "ollama",
            "OLLM_OLLAMA_HOST": server.url,
            "OLLM_MODEL": MODEL,
            "OLLM_RUNTIME__KIND": "inprocess",
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }
    )
    return values


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OLLM, "run", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _recorded_user_texts(ollm_home: Path) -> list[str]:
    settings = OllmSettings()
    with ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    ) as store:
        return [
            m.text
            for summary in store.list_sessions()
            for m in store.get_session(summary.session_id).messages
            if m.role == "user"
        ]


def _turn_requests(server: FakeOllama) -> list[dict[str, Any]]:
    return [
        r
        for r in server.chat_requests
        if not str(r["messages"][-1].get("content", "")).startswith("Write a title")
    ]


def test_a_prompt_larger_than_the_window_is_refused_with_the_sizes_and_exit_code_2(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    done = _run(env, tmp_path, "-p", HUGE)
    assert done.returncode == 2, done.stderr
    assert f"the model's window is {WINDOW} tokens" in done.stderr
    assert "the message is about" in done.stderr and "it was not sent or recorded" in done.stderr
    assert "--truncate-prompt" in done.stderr
    assert _turn_requests(server) == []
    assert _recorded_user_texts(ollm_home) == []
    as_json = _run(env, tmp_path, "-p", HUGE, "--json")
    assert as_json.returncode == 2
    error = orjson.loads(as_json.stderr)
    assert error["type"] == "PromptTooLargeError" and "--truncate-prompt" in error["hint"]
    assert _turn_requests(server) == [] and _recorded_user_texts(ollm_home) == []


def test_truncate_prompt_cuts_with_consent_and_says_so_on_stderr_and_in_json(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    done = _run(env, tmp_path, "-p", HUGE, "--truncate-prompt", "--json")
    assert done.returncode == 0, done.stderr
    result = orjson.loads(done.stdout)
    [notice, *_] = result["notices"]
    assert "--truncate-prompt" in notice and f"window of {WINDOW} tokens" in notice
    assert "cut out" in " ".join(done.stderr.split())
    [request] = _turn_requests(server)
    sent = request["messages"][-1]["content"]
    assert "tokens left out ...]" in sent and len(sent) < len(HUGE)
    assert sent.startswith("sentence 0 of") and sent.endswith(
        "sentence 999 of a very long pasted document."
    )
    assert _recorded_user_texts(ollm_home) == [sent]  # recorded as it was sent


def test_a_prompt_that_fits_goes_through_untouched(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    done = _run(env, tmp_path, "-p", "a short question", "--json", "--truncate-prompt")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["notices"] == []
    assert _recorded_user_texts(ollm_home) == ["a short question"]
