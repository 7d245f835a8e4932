"""Helpers of the batch, load and soak tests: settings for the simulated
provider, and running a batch through a real in-process pipeline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.harness._batch_runner import BatchProgress, BatchReport, BatchRunner
from ollm_cli.pipeline.harness._batch_script import BatchScript
from ollm_cli.pipeline.providers import ChatRequest, SimulatedProvider
from ollm_cli.pipeline.records import Session, SessionMessage
from ollm_cli.pipeline.runtime import RuntimeKind, create_runtime

REPO = Path(__file__).resolve().parents[2]

# The `ollm` command as users run it.
OLLM_MAIN = "from ollm_cli.cli.app import main; main()"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


def simulated_settings(*, latency_ms: float = 0.0, **simulated: Any) -> OllmSettings:
    """The simulated provider, one tool worker, no project files."""
    settings = OllmSettings()
    settings.provider.name = "simulated"
    settings.provider.simulated.latency_ms = latency_ms
    settings.provider.simulated.output_tokens = 12
    for key, value in simulated.items():
        setattr(settings.provider.simulated, key, value)
    settings.runtime.kind = "inprocess"
    settings.runtime.tool_workers = 1
    settings.services.context.load_project_files = False
    return settings


def expected_answer(settings: OllmSettings, text: str) -> str:
    """What the simulated model answers to a conversation whose last user message is ``text``."""
    provider = SimulatedProvider(settings.provider.simulated.model_copy(update={"latency_ms": 0}))
    return provider.complete(ChatRequest(model="simulated", messages=[SessionMessage.user(text)]))


async def run_batch(
    settings: OllmSettings,
    workspace: Path,
    script: BatchScript,
    results: Path,
    *,
    kind: RuntimeKind = "inprocess",
    concurrency: int = 4,
    resume: bool = False,
    on_progress: Any = None,
    runner_hook: Any = None,
) -> tuple[BatchReport, dict[str, Session]]:
    """Run ``script`` through a real pipeline; return the report and every recorded session."""
    runtime = create_runtime(settings, workspace, kind=kind)
    await runtime.start()
    try:
        coordinator = Coordinator(runtime, settings, workspace=workspace)
        runner = BatchRunner(
            coordinator,
            script,
            results,
            concurrency=concurrency,
            resume=resume,
            on_progress=on_progress,
        )
        if runner_hook is not None:
            runner_hook(runner)
        report = await runner.run()
        sessions: dict[str, Session] = {}
        for summary in await runtime.recording.call("list_sessions", tag=script.name):
            sessions[summary.session_id] = await runtime.recording.call(
                "get_session", summary.session_id
            )
        return report, sessions
    finally:
        await runtime.shutdown()


def stop_after(turns: int) -> tuple[Any, list[BatchRunner]]:
    """A progress callback that asks the runner to stop once ``turns`` turns are done."""
    holder: list[BatchRunner] = []

    def progress(state: BatchProgress) -> None:
        if state.turns_done >= turns and holder:
            holder[0].request_stop()

    return progress, holder


def ollm(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``ollm ARGS`` in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-c", OLLM_MAIN, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
