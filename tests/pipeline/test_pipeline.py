"""The whole pipeline, in-process and on a real local Ray, against a real HTTP
server speaking Ollama's wire format."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config.settings import HookSettings, OllmSettings
from pipeline.coordinator import Coordinator, TurnResult
from pipeline.errors import ActorFailedError
from pipeline.events import EventBus, PipelineEvent
from pipeline.records import Session, ToolCallPart, ToolResultPart
from pipeline.runtime import Runtime, create_runtime
from tests.fake_ollama import FakeModel, FakeOllama, Reply

MODEL = "llama3.2:latest"


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "notes.txt").write_text("The meeting is on Tuesday.\n")
    return folder


def make_settings(server: FakeOllama, **changes: Any) -> OllmSettings:
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.tool_workers = 1
    settings.services.context.load_project_files = False
    for key, value in changes.items():
        section, _, attr = key.partition("__")
        target = settings
        for part in section.split("."):
            target = getattr(target, part)
        setattr(target, attr, value)
    return settings


async def converse(
    settings: OllmSettings,
    workspace: Path,
    messages: list[str],
    *,
    kind: str = "inprocess",
    events: EventBus | None = None,
    between: Any = None,
) -> tuple[str, list[TurnResult | BaseException], Session]:
    runtime = create_runtime(settings, workspace, kind=kind)  # type: ignore[arg-type]
    await runtime.start()
    try:
        coordinator = Coordinator(runtime, settings, workspace=workspace, events=events)
        sid = await coordinator.start_session()
        results: list[TurnResult | BaseException] = []
        for index, text in enumerate(messages):
            if between is not None:
                await between(index, runtime)
            try:
                results.append(await coordinator.run_turn(sid, text))
            except ActorFailedError as error:
                results.append(error)
        await coordinator.end_session(sid)
        session = await runtime.recording.call("get_session", sid)
        return sid, results, session
    finally:
        await runtime.shutdown()


def roles(session: Session) -> list[str]:
    return [m.role for m in session.messages]


@pytest.mark.parametrize("kind", ["inprocess", pytest.param("ray", marks=pytest.mark.ray)])
def test_conversation_with_tool_calls_is_recorded_exactly(
    kind: str, server: FakeOllama, workspace: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "ray":
        request.getfixturevalue("ray_instance")
    server.script(
        Reply.tool_call("read_file", {"path": "notes.txt"}, text="Let me look."),
        Reply.text("The meeting is on Tuesday.", prompt_eval_count=50, eval_count=7),
    )
    settings = make_settings(server)
    seen: list[PipelineEvent] = []
    events = EventBus()
    events.subscribe(seen.append)
    _, results, session = asyncio.run(
        converse(settings, workspace, ["When is the meeting?"], kind=kind, events=events)
    )
    result = results[0]
    assert isinstance(result, TurnResult)
    assert result.answer == "The meeting is on Tuesday."
    assert result.stopped is None and result.tool_calls == 1 and result.rounds == 2
    assert roles(session) == ["user", "assistant", "tool", "assistant"]
    assert session.messages[0].text == "When is the meeting?"
    call = session.messages[1].parts[-1]
    assert isinstance(call, ToolCallPart) and call.name == "read_file"
    tool_result = session.messages[2].parts[0]
    assert isinstance(tool_result, ToolResultPart) and "Tuesday" in tool_result.content
    assert tool_result.tool_call_id == call.id
    assert [c.name for c in session.tool_calls] == ["read_file"]
    assert session.tool_calls[0].success is True
    assert session.tool_calls[0].duration_ms is not None
    assert session.metadata.prompt_tokens >= 50 and session.metadata.completion_tokens >= 7
    # what the model was sent: system prompt first, then the tool result in the second round
    second = server.chat_requests[1]["messages"]
    assert second[0]["role"] == "system"
    assert any(m["role"] == "tool" and "Tuesday" in m["content"] for m in second)
    kinds = [e.kind for e in seen]
    assert kinds[0] == "session:start" and kinds[-1] == "session:end"
    assert "tool:call" in kinds and "model:text" in kinds


def test_context_additions_reach_the_system_prompt(server: FakeOllama, workspace: Path) -> None:
    (workspace / "OLLM.md").write_text("Always answer in French.")
    settings = make_settings(server)
    settings.services.context.load_project_files = True

    async def scenario() -> None:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            sid = await coordinator.start_session()
            await coordinator.context.add(sid, "ticket", "Ticket ABC-12 is open.", priority=120)
            await coordinator.run_turn(sid, "hi")
            await coordinator.context.remove(sid, "ticket")
            await coordinator.run_turn(sid, "and now?")
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()

    asyncio.run(scenario())
    system = server.chat_requests[0]["messages"][0]["content"]
    assert "Ticket ABC-12 is open." in system and "Always answer in French." in system
    assert system.index("ABC-12") < system.index("French")
    [second] = [r for r in server.chat_requests if r["messages"][-1]["content"] == "and now?"]
    after = second["messages"][0]["content"]
    assert "ABC-12" not in after and "Always answer in French." in after


def test_repeated_tool_calls_are_stopped_and_reported(server: FakeOllama, workspace: Path) -> None:
    server.script(*[Reply.tool_call("read_file", {"path": "notes.txt"}) for _ in range(6)])
    settings = make_settings(server)
    settings.services.loop_detection.on_detect = "stop"
    seen: list[PipelineEvent] = []
    events = EventBus()
    events.subscribe(seen.append, {"loop:detected"})
    _, results, session = asyncio.run(
        converse(settings, workspace, ["read it again and again"], events=events)
    )
    result = results[0]
    assert isinstance(result, TurnResult)
    assert result.stopped == "loop" and result.loop is not None
    assert result.loop.kind == "repeated-tool"
    assert seen and seen[0].kind == "loop:detected"
    assert len(session.tool_calls) == 2  # the third identical call is refused


def test_turn_limit_stops_the_turn(server: FakeOllama, workspace: Path) -> None:
    server.script(*[Reply.tool_call("read_file", {"path": f"f{i}.txt"}) for i in range(6)])
    settings = make_settings(server)
    settings.services.loop_detection.max_turns = 3
    _, results, _ = asyncio.run(converse(settings, workspace, ["go"]))
    result = results[0]
    assert isinstance(result, TurnResult) and result.stopped == "limit"


def test_hook_output_becomes_context(server: FakeOllama, workspace: Path) -> None:
    settings = make_settings(server)
    settings.hooks = [
        HookSettings.model_validate(
            {"event": "session:message", "command": "echo hook saw $(cat | head -c 40)"}
        )
    ]

    async def scenario() -> None:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            sid = await coordinator.start_session()
            await coordinator.run_turn(sid, "first")
            await coordinator.run_turn(sid, "second")
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()

    asyncio.run(scenario())
    second = next(
        body for body in server.chat_requests if body["messages"][-1]["content"] == "second"
    )
    assert "hook saw" in second["messages"][0]["content"]


@pytest.mark.ray
def test_killed_actor_restarts_and_the_conversation_goes_on(
    ray_instance: None, server: FakeOllama, workspace: Path
) -> None:
    settings = make_settings(server)

    async def kill_before_second(index: int, runtime: Runtime) -> None:
        if index == 1:
            await runtime.recording.kill()

    _, results, session = asyncio.run(
        converse(
            settings,
            workspace,
            ["one", "two", "three"],
            kind="ray",
            between=kill_before_second,
        )
    )
    assert isinstance(results[0], TurnResult) and isinstance(results[2], TurnResult)
    texts = [m.text for m in session.messages if m.role == "user"]
    assert texts[0] == "one" and texts[-1] == "three"
    if isinstance(results[1], TurnResult):
        assert texts == ["one", "two", "three"]
    else:
        assert "restarting" in str(results[1])


@pytest.mark.ray
def test_a_restarted_provider_is_sent_the_whole_history_again(
    ray_instance: None, server: FakeOllama, workspace: Path
) -> None:
    # the provider actor keeps each conversation's messages so only new ones
    # travel; after a restart it holds none, and the model must still see all
    settings = make_settings(server)

    async def kill_before_third(index: int, runtime: Runtime) -> None:
        if index == 2:
            await runtime.provider.kill()

    _, results, session = asyncio.run(
        converse(
            settings,
            workspace,
            ["one", "two", "three", "four"],
            kind="ray",
            between=kill_before_third,
        )
    )
    assert isinstance(results[-1], TurnResult) and results[-1].answer
    sent = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "user"]
    recorded = [m.text for m in session.messages if m.role == "user"]
    assert sent == recorded and recorded[0] == "one" and recorded[-1] == "four"


def test_small_window_compresses_in_background_and_file_stays_complete(
    workspace: Path,
) -> None:
    with FakeOllama(models=[FakeModel(context_length=900)]) as server:
        settings = make_settings(server)
        settings.services.compression.preserve_recent = 64
        settings.services.compression.response_reserve = 128
        settings.services.compression.strategy = "truncate"
        long = "word " * 120
        messages = [f"message {i}: {long}" for i in range(8)]
        _, results, session = asyncio.run(converse(settings, workspace, messages))
    assert all(isinstance(r, TurnResult) for r in results)
    assert [m.text for m in session.messages if m.role == "user"] == messages
    assert session.metadata.compression_count >= 1
    assert session.metadata.compression_history[0].tokens_after < (
        session.metadata.compression_history[0].tokens_before
    )
    # every request fitted the window the server declared
    for body in server.chat_requests:
        assert body["options"]["num_ctx"] == 900
