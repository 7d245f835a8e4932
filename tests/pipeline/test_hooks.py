"""Hooks run in the tool sandbox (issue 35, 1): the event on stdin, the workspace as a
tool sees it, the sandbox's limits with the hook's own timeout, the control paths
protected. A conversation on the in-process runtime, a real fake Ollama server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ollm_cli.config.settings import HookSettings, OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeOllama

MODEL = "llama3.2:latest"


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


def converse_with_hooks(server: FakeOllama, workspace: Path, *hooks: dict[str, object]) -> str:
    """One turn with ``hooks`` configured; the system prompt the model got."""
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.services.context.load_project_files = False
    settings.hooks = [HookSettings.model_validate(hook) for hook in hooks]

    async def scenario() -> None:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            sid = await coordinator.start_session(title="hooks")
            await coordinator.run_turn(sid, "hello")
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()

    asyncio.run(scenario())
    first = next(b for b in server.chat_requests if b["messages"][-1]["content"] == "hello")
    return str(first["messages"][0]["content"])


def test_a_hook_gets_the_event_on_stdin_in_the_workspace_as_a_tool_sees_it(
    server: FakeOllama, workspace: Path, ollm_home: Path
) -> None:
    ollm_home.mkdir()
    (ollm_home / "secret-note").write_text("the home's own")
    seen = converse_with_hooks(
        server,
        workspace,
        {
            "event": "session:start",
            "command": f"cat > event.json; echo pwd=$(pwd); "
            f"echo home=[$(ls -A {ollm_home} | tr '\\n' ,)]; "
            f"touch {workspace.parent}/outside",  # lands in the sandbox's private /tmp
        },
    )
    event = orjson.loads((workspace / "event.json").read_bytes())
    assert event["kind"] == "session:start" and event["session_id"]
    assert f"pwd={workspace}" in seen
    assert "home=[]" in seen
    assert not (workspace.parent / "outside").exists()


def test_a_hook_past_its_timeout_is_stopped_and_adds_nothing(
    server: FakeOllama, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The hook's ``timeoutS`` is its wall time in the sandbox (not ``wallTimeS``'s 60 s):
    had it run on, its last line would be in the prompt."""
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.hooks"):
        seen = converse_with_hooks(
            server,
            workspace,
            {
                "event": "session:start",
                "command": "echo early; sleep 15; echo late",
                "timeoutS": 0.5,
            },
            {"event": "session:start", "command": "echo the-other-hook"},
        )
    assert "late" not in seen and "early" not in seen
    assert "the-other-hook" in seen
    assert any("timed out after 0.5 s" in r.getMessage() for r in caplog.records)


def test_a_hook_cannot_plant_a_config_that_a_later_run_obeys(
    server: FakeOllama, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.hooks"):
        converse_with_hooks(
            server,
            workspace,
            {
                "event": "session:start",
                "command": "mkdir -p .ollm sub/.ollm; "
                "echo 'hooks: [{event: session:start, command: id}]' > .ollm/config.yaml; "
                "echo 'hooks: [{event: session:start, command: id}]' > sub/.ollm/config.yaml; "
                "echo done",
            },
        )
    assert not (workspace / ".ollm").exists()
    assert not (workspace / "sub" / ".ollm").exists()
    assert any("control paths, undone" in r.getMessage() for r in caplog.records)
