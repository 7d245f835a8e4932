"""Helpers of the service tests: the ``ollm`` command run as a user runs it, against a
real local service (a Ray head of its own per ``OLLM_HOME``) and a fake Ollama.

A Ray start costs seconds on this machine, so one service is shared by the tests
of a module that can share it (``shared_home``); the tests that start, kill or
stop a service use homes of their own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.service._state import ServicePaths, ServiceState, read_state
from tests.fake_ollama import FakeModel, FakeOllama, Reply

REPO = Path(__file__).resolve().parents[2]
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
MODEL = "llama3.2:latest"


COMPRESS_SOON = {
    # compression is due after the second long answer, and summarizes the first
    "OLLM_SERVICES__COMPRESSION__THRESHOLD": "0.2",
    "OLLM_SERVICES__COMPRESSION__STRATEGY": "summarize",
    "OLLM_SERVICES__COMPRESSION__PRESERVE_RECENT": "0",
    "OLLM_SERVICES__COMPRESSION__RESPONSE_RESERVE": "0",
}


class Router:
    """Answers the fake Ollama's chats by what they are: a title, a summary (held
    while ``summary_gate`` is set and not released), or a turn (held while the
    message names a gate: ``[gate:NAME]``)."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.summary_gate: threading.Event | None = None
        self.summaries = 0

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = str(body["messages"][-1].get("content", ""))
        if text.startswith("Write a title"):
            return Reply.text("A service test", chunks=1)
        if text.startswith("You compress the earlier part"):
            self.summaries += 1
            if self.summary_gate is not None:
                return Reply.text(SUMMARY, chunks=2, hold=self.summary_gate, hold_after=1)
            return Reply.text(SUMMARY, chunks=1)
        if text.startswith("[long]"):
            # a prompt count like a real model's keeps the token calibration sane
            prompt = len(orjson.dumps(body)) // 4
            return Reply.text(LONG_ANSWER, chunks=4, prompt_eval_count=prompt)
        named = re.search(r"\[gate:(\w+)\]", text)
        if named is not None:
            name = named.group(1)
            event = self.gate(name)
            return Reply.text(f"answer to {name} done", chunks=3, hold=event, hold_after=1)
        return Reply.text(f"echo: {text[:40]}", chunks=2)


LONG_ANSWER = " ".join(f"fact{i} is recorded in the answer" for i in range(80))
SUMMARY = "## Goal\nservice tests\n## Facts\nnone"


def service_env(home: Path, server: FakeOllama, **extra: str) -> dict[str, str]:
    """The environment of an ``ollm`` command of ``home`` against the fake Ollama."""
    values = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "RAY_"))}
    values.update(
        {
            "OLLM_HOME": str(home),
            "OLLM_PROVIDER": "ollama",
            "OLLM_OLLAMA_HOST": server.url,
            "OLLM_MODEL": MODEL,
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "PYTHONPATH": str(REPO),
            "NO_COLOR": "1",
            "COLUMNS": "200",
            **COMPRESS_SOON,
            **extra,
        }
    )
    return values


def ollm(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OLLM, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def spawn(*args: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*OLLM, *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition: Callable[[], Any], timeout: float = 120.0, what: str = "") -> Any:
    """Poll ``condition`` until it is truthy (the machine is shared: generous)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.1)


def state_of(home: Path) -> ServiceState | None:
    return read_state(ServicePaths.for_home(home))


def store_of(home: Path, monkeypatch: pytest.MonkeyPatch) -> ChatRecordingService:
    """The session store of ``home``, read as ``ollm sessions`` reads it."""
    monkeypatch.setenv("OLLM_HOME", str(home))
    settings = OllmSettings()
    return ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )


def service_processes(state: ServiceState) -> list[Any]:
    from ollm_cli.pipeline.service._processes import service_members

    return service_members(state)


@pytest.fixture(scope="module")
def router() -> Router:
    return Router()


@pytest.fixture(scope="module")
def server(router: Router) -> Iterator[FakeOllama]:
    with FakeOllama(models=[FakeModel(name=MODEL, context_length=4096)]) as fake:
        fake.default_reply = router
        yield fake


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory, server: FakeOllama) -> Iterator[Path]:
    """A home whose service runs for the whole module (stopped at its end)."""
    home = tmp_path_factory.mktemp("shared") / "home"
    env = service_env(home, server)
    started = ollm("service", "start", env=env, cwd=home.parent)
    assert started.returncode == 0, started.stderr
    yield home
    ollm("service", "stop", env=env, cwd=home.parent)
