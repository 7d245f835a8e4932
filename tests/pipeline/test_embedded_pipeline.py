"""The pipeline with the real SmolLM2 model (llama.cpp in-process): a turn end to
end, recorded, and the model's own degenerate looping caught by the loop detector."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator, TurnResult
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.runtime import create_runtime

pytestmark = pytest.mark.model


def embedded_settings() -> OllmSettings:
    settings = OllmSettings()
    settings.provider.name = "embedded"
    settings.provider.embedded.max_tokens = 120
    settings.provider.embedded.temperature = 0.0
    settings.provider.embedded.threads = 1
    settings.runtime.tool_workers = 1
    settings.services.context.load_project_files = False
    settings.services.loop_detection.on_detect = "stop"
    return settings


async def one_turn(
    settings: OllmSettings, workspace: Path, text: str
) -> tuple[TurnResult, Session]:
    runtime = create_runtime(settings, workspace, kind="inprocess")
    await runtime.start()
    try:
        coordinator = Coordinator(runtime, settings, workspace=workspace)
        sid = await coordinator.start_session()
        result = await coordinator.run_turn(sid, text)
        await coordinator.end_session(sid)
        session = await runtime.recording.call(RecordingShell.get_session, sid)
    finally:
        await runtime.shutdown()
    return result, session


def test_a_turn_with_smollm2_is_recorded(tmp_path: Path) -> None:
    result, session = asyncio.run(one_turn(embedded_settings(), tmp_path, "Name three colors."))
    assert result.stopped is None and result.answer.strip()
    assert session.provider == "embedded" and "smollm2" in session.model.lower()
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.messages[1].text == result.answer
    assert session.metadata.prompt_tokens > 0 and session.metadata.completion_tokens > 0


def test_smollm2_looping_is_caught_by_the_loop_detector(tmp_path: Path) -> None:
    settings = embedded_settings()
    settings.provider.embedded.max_tokens = 400
    result, session = asyncio.run(
        one_turn(
            settings,
            tmp_path,
            "List all the days of the week, again and again.",
        )
    )
    assert result.stopped == "loop"
    assert result.loop is not None and result.loop.kind == "stream-repetition"
    # what the model wrote before it was stopped is recorded, and the user message too
    assert session.messages[0].text.startswith("List all the days")
    assert session.messages[-1].role == "assistant" and "Monday" in session.messages[-1].text


def test_an_answer_cut_at_the_token_limit_is_recorded_and_said(tmp_path: Path) -> None:
    """Issue 24: SmolLM2 stopped by ``maxTokens`` mid-answer: the message records
    why it ended, and the turn's notices say so with the setting to raise."""
    settings = embedded_settings()
    settings.provider.embedded.max_tokens = 8
    result, session = asyncio.run(
        one_turn(settings, tmp_path, "Write a long story about a dragon and a knight.")
    )
    assert result.finish_reason == "length" and result.token_limit == 8
    assert any(
        "cut at the token limit (8 tokens)" in n and "provider.embedded.maxTokens" in n
        for n in result.notices
    )
    answer = session.messages[-1]
    assert answer.role == "assistant" and answer.text == result.answer
    assert (answer.model_extra or {}).get("finishReason") == "length"
    assert (answer.model_extra or {}).get("tokenLimit") == 8
