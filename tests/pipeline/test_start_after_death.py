"""A session start hit by an actor death: the next start waits for Ray's restart.

The provider is killed while the start's request for the model's window
(``/api/show``) is held at the fake Ollama server, so the death lands inside the
start. The start fails with :class:`ActorFailedError`; a start tried at once after
it must not meet the provider still restarting (Ray answers that with
``ActorUnavailableError``), and the half-made session is not left behind.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.errors import ActorFailedError
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeOllama
from tests.waiting import wait_until


@pytest.mark.ray
def test_a_start_tried_again_after_a_death_waits_for_the_restart(
    ray_instance: None, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()

    async def run(server: FakeOllama) -> tuple[list[str], str, list[str]]:
        settings = OllmSettings()
        settings.provider.name = "ollama"
        settings.provider.model = "llama3.2:latest"
        settings.provider.ollama.host = server.url
        settings.runtime.tool_workers = 1
        settings.services.context.load_project_files = False
        runtime = create_runtime(settings, workspace, kind="ray")
        await runtime.start()
        release = threading.Event()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace, tags=["died"])
            server.hold_next("/api/show", release)
            start = asyncio.ensure_future(coordinator.start_session())
            await asyncio.to_thread(
                wait_until, lambda: server.received("/api/show"), what="the start's /api/show"
            )
            await runtime.provider.kill()
            failures: list[str] = []
            try:
                await start
            except ActorFailedError as error:
                failures.append(type(error).__name__)
            sid = await coordinator.start_session()  # at once: no pause of our own
            result = await coordinator.run_turn(sid, "still there?")
            await coordinator.end_session(sid)
            tagged = await runtime.recording.call(RecordingShell.list_sessions, tag="died")
            return failures, result.answer, [s.session_id for s in tagged]
        finally:
            release.set()
            await runtime.shutdown()

    with FakeOllama() as server:
        failures, answer, sessions = asyncio.run(run(server))
    assert failures == ["ActorFailedError"]
    assert answer == "You said: still there?"
    assert len(sessions) == 1  # the start cut short left no session
