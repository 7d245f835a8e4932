"""The whole pipeline, in-process and on a real local Ray, against a real HTTP
server speaking Ollama's wire format."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import HookSettings, OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator, TurnResult
from ollm_cli.pipeline.errors import ActorFailedError, ProviderError
from ollm_cli.pipeline.events import EventBus, PipelineEvent
from ollm_cli.pipeline.records import Session, SessionMessage, ToolCallPart, ToolResultPart
from ollm_cli.pipeline.runtime import Runtime, create_runtime
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
    title: str | None = None,
) -> tuple[str, list[TurnResult | BaseException], Session]:
    runtime = create_runtime(settings, workspace, kind=kind)  # type: ignore[arg-type]
    await runtime.start()
    try:
        coordinator = Coordinator(runtime, settings, workspace=workspace, events=events)
        sid = await coordinator.start_session(title=title)  # a title: the model writes none
        results: list[TurnResult | BaseException] = []
        for index, text in enumerate(messages):
            if between is not None:
                await between(index, runtime)
            try:
                results.append(await coordinator.run_turn(sid, text))
            except ActorFailedError as error:
                results.append(error)
        await coordinator.end_session(sid)
        session = await runtime.recording.call(RecordingShell.get_session, sid)
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


@pytest.mark.parametrize("kind", ["inprocess", pytest.param("ray", marks=pytest.mark.ray)])
def test_the_turn_limit_counts_each_request_from_its_start(
    kind: str, server: FakeOllama, workspace: Path, request: pytest.FixtureRequest
) -> None:
    # a plain answer lets the loop detector begin the next request at once (no
    # call when that request comes); the next request's limit is still exact
    if kind == "ray":
        request.getfixturevalue("ray_instance")
    server.script(
        Reply.text("Hello there."),
        Reply.text("Fine, thanks."),
        *[Reply.tool_call("read_file", {"path": f"f{i}.txt"}) for i in range(6)],
    )
    settings = make_settings(server)
    settings.services.loop_detection.max_turns = 3
    _, results, _ = asyncio.run(
        converse(settings, workspace, ["hi", "how are you", "go"], kind=kind, title="t")
    )
    assert [r.stopped for r in results if isinstance(r, TurnResult)] == [None, None, "limit"]
    last = results[-1]
    assert isinstance(last, TurnResult) and last.rounds == 3 and last.tool_calls == 3
    assert last.loop is not None and last.loop.count == 4


def test_the_answer_waits_for_the_users_message_to_be_durable(
    server: FakeOllama, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the model starts while the message is being recorded; nothing of its
    # answer is shown or recorded before the message is durable
    server.script(Reply.text("Quick answer."))
    settings = make_settings(server)
    durable: list[float] = []
    original = RecordingShell.record_message

    @functools.wraps(original)  # called by the shell method's name
    def slow_record(self: RecordingShell, session_id: str, message: SessionMessage) -> None:
        if message.role == "user":
            time.sleep(0.3)
        original(self, session_id, message)
        durable.append(time.monotonic())

    monkeypatch.setattr(RecordingShell, "record_message", slow_record)
    seen: list[tuple[str, str, float]] = []
    events = EventBus()
    events.subscribe(
        lambda e: seen.append((e.kind, getattr(e, "role", ""), time.monotonic())),
        {"session:message", "model:text"},
    )
    _, results, session = asyncio.run(
        converse(settings, workspace, ["hello"], events=events, title="t")
    )
    assert isinstance(results[0], TurnResult) and results[0].answer == "Quick answer."
    assert [(kind, role) for kind, role, _ in seen][:2] == [
        ("session:message", "user"),
        ("model:text", ""),
    ]
    assert seen[1][2] >= durable[0]  # the first words came after the message was durable
    assert roles(session) == ["user", "assistant"]
    assert server.chat_requests[0]["messages"][-1] == {"role": "user", "content": "hello"}


def test_a_message_that_cannot_be_recorded_gets_no_answer(
    server: FakeOllama, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(Reply.text("An answer nobody should see."), Reply.text("Second try works."))
    settings = make_settings(server)
    original = RecordingShell.record_message
    failures = [1]

    @functools.wraps(original)
    def failing_record(self: RecordingShell, session_id: str, message: SessionMessage) -> None:
        if message.role == "user" and failures:
            failures.pop()
            time.sleep(0.1)
            raise ActorFailedError("the recording service stopped", hint="send it again")
        original(self, session_id, message)

    monkeypatch.setattr(RecordingShell, "record_message", failing_record)
    shown: list[str] = []
    events = EventBus()
    events.subscribe(lambda e: shown.append(getattr(e, "text", "")), {"model:text"})

    async def scenario() -> tuple[list[str], list[str], list[TurnResult | BaseException]]:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace, events=events)
            sid = await coordinator.start_session(title="t")
            results: list[TurnResult | BaseException] = []
            for text in ["lost", "kept"]:
                try:
                    results.append(await coordinator.run_turn(sid, text))
                except ActorFailedError as error:
                    results.append(error)
            live = [m.text for m in coordinator.conversations[sid].context.messages]
            await coordinator.end_session(sid)
            session: Session = await runtime.recording.call(RecordingShell.get_session, sid)
            return live, [m.text for m in session.messages], results
        finally:
            await runtime.shutdown()

    live, recorded, results = asyncio.run(scenario())
    assert isinstance(results[0], ActorFailedError)
    assert isinstance(results[1], TurnResult)
    assert "An answer nobody should see." not in "".join(shown)
    assert recorded == ["kept", results[1].answer]
    asked = [m["content"] for m in server.chat_requests[-1]["messages"] if m["role"] == "user"]
    assert asked == ["kept"]  # the model was asked about it, and not about the lost one
    assert live == recorded  # the failed message left the context too


def test_a_message_sent_again_after_a_failed_turn_is_recorded_once(
    server: FakeOllama, workspace: Path
) -> None:
    # the model failed after the message was recorded; the user sends it again
    # (as the error says to): it is answered, not recorded a second time
    server.script(Reply.http_error(500, "model crashed"), Reply.text("Now it works."))
    settings = make_settings(server)

    async def scenario() -> tuple[list[str | BaseException], Session]:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            sid = await coordinator.start_session(title="t")
            outcomes: list[str | BaseException] = []
            for text in ["what now?", "what now?", "what now?"]:
                try:
                    outcomes.append((await coordinator.run_turn(sid, text)).answer)
                except ProviderError as error:
                    outcomes.append(error)
            await coordinator.end_session(sid)
            return outcomes, await runtime.recording.call(RecordingShell.get_session, sid)
        finally:
            await runtime.shutdown()

    outcomes, session = asyncio.run(scenario())
    assert isinstance(outcomes[0], ProviderError) and outcomes[1] == "Now it works."
    # once answered, the same words are a new message
    assert [(m.role, m.text) for m in session.messages][:3] == [
        ("user", "what now?"),
        ("assistant", "Now it works."),
        ("user", "what now?"),
    ]
    assert len(session.messages) == 4


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
        if index != 2:
            return
        before = await runtime.provider.call(ShellBase.ping)  # the actor's process id
        await runtime.provider.kill()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a kill takes effect a moment later
            try:
                if await runtime.provider.call(ShellBase.ping) != before:
                    return
            except ActorFailedError:
                pass
            await asyncio.sleep(0.05)
        raise AssertionError("the provider actor was not restarted")

    _, results, session = asyncio.run(
        converse(
            settings,
            workspace,
            ["one", "two", "three", "four"],
            kind="ray",
            between=kill_before_third,
        )
    )
    assert all(isinstance(r, TurnResult) and r.answer for r in results)
    recorded = [m.text for m in session.messages if m.role == "user"]
    assert recorded == ["one", "two", "three", "four"]
    asked = [
        [m["content"] for m in r["messages"] if m["role"] == "user"]
        for r in server.chat_requests
        if r["messages"][0]["role"] == "system"  # not the title's request
    ]
    assert asked[2:] == [recorded[:3], recorded]  # everything, also right after the restart


def test_small_window_compresses_in_background_and_file_stays_complete(
    workspace: Path,
) -> None:
    # the tool schemas alone take about 900 tokens: a window of 900 left no room for a
    # message at all (every one went as a "left out" marker); now such a message is refused
    with FakeOllama(models=[FakeModel(context_length=2048)]) as server:
        settings = make_settings(server)
        settings.services.compression.preserve_recent = 64
        settings.services.compression.response_reserve = 128
        settings.services.compression.strategy = "truncate"
        long = "word " * 120
        messages = [f"message {i}: {long}" for i in range(12)]
        _, results, session = asyncio.run(converse(settings, workspace, messages))
    assert all(isinstance(r, TurnResult) for r in results)
    assert [m.text for m in session.messages if m.role == "user"] == messages
    assert session.metadata.compression_count >= 1
    assert session.metadata.compression_history[0].tokens_after < (
        session.metadata.compression_history[0].tokens_before
    )
    # every request fitted the window the server declared
    for body in server.chat_requests:
        assert body["options"]["num_ctx"] == 2048
        said = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert not any("tokens left out" in text for text in said)  # never a marker
