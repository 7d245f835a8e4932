"""What the user says is never cut silently: a message larger than the model's window
is refused (exit code 2, the sizes named, nothing sent or recorded) or, with
``--truncate-prompt``, cut and said so; messages left out of a request to fit the
window are said in the chat and in ``--json``; the status line counts what was sent."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from rich.console import Console

from ollm_cli.cli.chat_repl import ChatRepl
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import TokenCounter
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.events import PipelineEvent, StatusEvent
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeModel, FakeOllama, Reply

MODEL = "llama3.2:latest"
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
WINDOW = 4096
HUGE = " ".join(f"sentence {n} of a very long pasted document." for n in range(1000))


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama(models=[FakeModel(name=MODEL, context_length=WINDOW)]) as fake:
        # no prompt count: the token calibration stays at 1 (the sizes below are exact)
        fake.default_reply = lambda body: Reply.text("understood", prompt_eval_count=0)
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


def _words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def _chat(
    server: FakeOllama, tmp_path: Path, lines: list[str]
) -> tuple[str, list[StatusEvent], Coordinator, list[dict[str, Any]]]:
    """The chat run in this process on ``lines`` (compression off, so each request
    that would overflow is cut at once): what it printed, its status events, and the
    requests the model got, with what the coordinator counted for each."""
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    settings.services.compression.enabled = False
    feed = iter([*lines, "/exit"])
    loop = LoopThread()
    runtime = create_runtime(settings, tmp_path, kind="inprocess")
    screen = Console(file=io.StringIO(), width=200, no_color=True)
    repl = ChatRepl(loop, screen, screen, read_line=lambda prompt: next(feed))
    coordinator = Coordinator(runtime, settings, workspace=tmp_path)
    repl.coordinator = coordinator
    statuses: list[StatusEvent] = []

    def seen(event: PipelineEvent) -> None:
        if isinstance(event, StatusEvent):
            statuses.append(event)
        repl.render_event(event)

    coordinator.events.subscribe(seen)
    try:
        loop.run(runtime.start())
        sid = loop.run(coordinator.start_session())
        repl.chat(sid)
        for open_sid in list(coordinator.conversations):
            loop.run(coordinator.end_session(open_sid))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    return screen.file.getvalue(), statuses, coordinator, _turn_requests(server)  # type: ignore[attr-defined]


def _counted(coordinator: Coordinator, request: dict[str, Any]) -> tuple[int, int]:
    """A request as the model got it, counted the way the coordinator counts: its
    system prompt and messages, and apart its tool schemas."""
    counter: TokenCounter = coordinator.counter
    system, *messages = request["messages"]
    assert system["role"] == "system"
    said = (
        4  # the system message's framing (MESSAGE_OVERHEAD)
        + counter.count_text(system["content"])
        + sum(
            counter.count_message(SessionMessage.of_text(m["role"], m["content"])) for m in messages
        )
    )
    tools = counter.count_text(orjson.dumps(request["tools"]).decode())
    ratio = counter.ratio(MODEL)
    assert ratio == 1.0  # the fake model reports no prompt count: nothing calibrated
    return said, tools


def test_old_user_messages_left_out_to_fit_are_said_in_the_chat_and_the_status_counts_what_was_sent(
    server: FakeOllama, tmp_path: Path, ollm_home: Path
) -> None:
    said = [_words(500, f"m{n}w") for n in range(6)]
    shown, statuses, coordinator, requests = _chat(server, tmp_path, said)
    assert "error" not in shown
    flat = " ".join(shown.split())
    assert f"to fit the model's window of {WINDOW} tokens, this request" in flat
    assert "left out" in flat and "the session file keeps every message" in flat
    # an old user message really was left out of a later request...
    last = requests[-1]["messages"]
    assert said[-1] in [m["content"] for m in last]
    assert said[0] not in [m["content"] for m in last]
    # ...and the status line after each turn counts that request as it was sent
    idle = [s for s in statuses if s.activity == "idle"]
    assert len(idle) == len(requests) == len(said)
    allowances: set[int] = set()
    for status, request in zip(idle, requests, strict=True):
        as_sent, tools = _counted(coordinator, request)
        # the messages and system prompt exactly as sent, and the tool schemas as the
        # coordinator counts them (the Ollama client sends them in its own layout)
        allowances.add(status.tokens_used - as_sent)
        assert abs(status.tokens_used - as_sent - tools) <= tools * 0.2
        assert status.tokens_used <= WINDOW
    assert len(allowances) == 1
    assert f"{idle[-1].tokens_used}/{WINDOW} tokens" in shown


def test_a_message_too_large_for_the_window_is_refused_in_the_chat_and_it_goes_on(
    server: FakeOllama, tmp_path: Path, ollm_home: Path
) -> None:
    shown, _, _, requests = _chat(server, tmp_path, [HUGE, "a short one"])
    flat = " ".join(shown.split())
    assert "error: the message is about" in flat and f"window is {WINDOW} tokens" in flat
    assert [r["messages"][-1]["content"] for r in requests] == ["a short one"]
    assert _recorded_user_texts(ollm_home) == ["a short one"]


def test_a_user_message_left_out_to_fit_the_window_is_said_in_json(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    env["OLLM_SERVICES__COMPRESSION__STRATEGY"] = "truncate"
    first, second = _words(1000, "first"), _words(1000, "second")  # 2,000 tokens each
    done = _run(env, tmp_path, "-p", first, "--json")
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["notices"] == []
    done = _run(env, tmp_path, "--continue", "-p", second, "--json")
    assert done.returncode == 0, done.stderr
    notices = orjson.loads(done.stdout)["notices"]
    assert any("left out" in n and "the session file keeps every message" in n for n in notices)
    assert "left out" in " ".join(done.stderr.split())
    contents = [m["content"] for m in _turn_requests(server)[-1]["messages"]]
    assert second in contents and first not in contents  # it really was left out
    assert _recorded_user_texts(ollm_home) == [first, second]  # the file keeps both
