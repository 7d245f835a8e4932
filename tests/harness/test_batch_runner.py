"""The batch runner on a real in-process pipeline with the simulated provider:
recorded exactly, stopped and resumed, cancelled, failures and loop events."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import orjson
import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.errors import OllmError
from ollm_cli.pipeline.harness._batch_runner import (
    BatchJournal,
    BatchReport,
    BatchRunner,
    BatchStateError,
    ConversationResult,
    ConversationState,
    EndEntry,
    SessionEntry,
    TurnEntry,
    answered_turns,
    batch_failure,
    state_path_for,
)
from ollm_cli.pipeline.harness._batch_script import BatchScript, parse_yaml_script
from ollm_cli.pipeline.records import (
    Session,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ollm_cli.pipeline.runtime import create_runtime
from tests.fake_ollama import FakeOllama
from tests.harness.conftest import expected_answer, run_batch, simulated_settings, stop_after
from tests.waiting import wait_until

FIFTY = """\
name: fifty
context:
  - {key: persona, content: "You are agent {index}."}
conversations:
  - name: "{team}-{copy}"
    variables: [{team: red}, {team: blue}]
    copies: 25
    messages:
      - "Hello from {team} {copy}"
      - "Second message of {team} {copy}"
      - "Goodbye from {team} {copy}"
"""


def script_of(text: str) -> BatchScript:
    return parse_yaml_script(text, Path("batch.yaml"))


def small_script(conversations: int, turns: int, name: str = "small") -> BatchScript:
    messages = ", ".join(f'"c{{copy}} turn {t}"' for t in range(1, turns + 1))
    return script_of(
        f"name: {name}\nconversations:\n  - name: c{{copy}}\n    copies: {conversations}\n"
        f"    messages: [{messages}]\n"
    )


def read_results(path: Path) -> list[ConversationResult]:
    return [
        ConversationResult.model_validate(orjson.loads(line))
        for line in path.read_bytes().splitlines()
    ]


def assert_recorded_exactly(
    settings: OllmSettings, script: BatchScript, report: BatchReport, sessions: dict[str, Session]
) -> None:
    by_id = {c.id: c for c in script.conversations}
    assert report.done == len(script.conversations)
    assert report.failed == 0 and report.not_finished == 0
    assert sorted(r.conversation_id for r in report.results) == sorted(by_id)
    assert {r.session_id for r in report.results} == set(sessions)
    for result in report.results:
        conversation = by_id[result.conversation_id]
        session = sessions[result.session_id or ""]
        expected: list[tuple[str, str]] = []
        for text in conversation.messages:
            expected += [("user", text), ("assistant", expected_answer(settings, text))]
        assert [(m.role, m.text) for m in session.messages] == expected
        assert result.status == "done"
        assert result.final_answer == expected[-1][1]
        assert result.turns == len(conversation.messages)
        assert result.completion_tokens == 12 * len(conversation.messages)
        assert session.metadata.tags == [script.name]
        assert session.metadata.title == conversation.name
    assert sorted(r.conversation_id for r in read_results(Path(report.results_path))) == sorted(
        by_id
    )


def test_batch_of_50_conversations_recorded_exactly(tmp_path: Path, workspace: Path) -> None:
    settings = simulated_settings()
    script = script_of(FIFTY)
    assert len(script.conversations) == 50
    results = tmp_path / "fifty.results.jsonl"
    report, sessions = asyncio.run(run_batch(settings, workspace, script, results, concurrency=8))
    assert len(sessions) == 50
    assert_recorded_exactly(settings, script, report, sessions)
    assert report.turns == 150
    assert report.prompt_tokens > 0
    assert not report.stopped and report.ok
    assert batch_failure(report) is None
    # the context entry of each conversation was added to its session (kept beside it)
    for result in report.results:
        saved = settings.services.session.data_dir / ".context" / f"{result.session_id}.json"
        entries = orjson.loads(saved.read_bytes())
        assert entries[0]["key"] == "persona"
        assert entries[0]["content"] == f"You are agent {result.index}."


def test_batch_stopped_and_resumed(tmp_path: Path, workspace: Path) -> None:
    settings = simulated_settings(latency_ms=2)
    script = small_script(12, 3)
    results = tmp_path / "small.results.jsonl"
    progress, holder = stop_after(10)
    first, _ = asyncio.run(
        run_batch(
            settings,
            workspace,
            script,
            results,
            concurrency=3,
            on_progress=progress,
            runner_hook=holder.append,
        )
    )
    assert first.stopped
    assert 0 < first.done < 12 and first.not_finished == 12 - first.done
    assert 10 <= first.turns < 36
    failure = batch_failure(first)
    assert failure is not None and failure.exit_code == 130
    assert "--resume-batch" in (failure.hint or "")
    started = {entry.id: entry.session_id for entry in _journal_sessions(state_path_for(results))}
    assert len(started) > first.done  # some conversations stopped part way
    with pytest.raises(BatchStateError, match="already holds results"):
        asyncio.run(run_batch(settings, workspace, script, results))

    second, sessions = asyncio.run(
        run_batch(settings, workspace, script, results, concurrency=3, resume=True)
    )
    assert not second.stopped
    assert_recorded_exactly(settings, script, second, sessions)
    for result in second.results:  # part-way conversations went on in the same session
        if result.conversation_id in started:
            assert result.session_id == started[result.conversation_id]
    assert len(sessions) == 12


def _journal_sessions(path: Path) -> list[SessionEntry]:
    journal = BatchJournal.open(path)
    try:
        return [e for e in journal.read() if isinstance(e, SessionEntry)]
    finally:
        journal.close()


def test_cancelled_turns_are_sent_again_on_resume(tmp_path: Path, workspace: Path) -> None:
    settings = simulated_settings(latency_ms=20)
    script = small_script(4, 3, name="cancelled")
    results = tmp_path / "cancelled.results.jsonl"
    holder: list[BatchRunner] = []

    def cancel_after_three(state: object) -> None:
        if getattr(state, "turns_done", 0) >= 3 and holder:
            holder[0].cancel()

    first, _ = asyncio.run(
        run_batch(
            settings,
            workspace,
            script,
            results,
            concurrency=4,
            on_progress=cancel_after_three,
            runner_hook=holder.append,
        )
    )
    assert first.stopped and first.not_finished > 0
    second, sessions = asyncio.run(
        run_batch(settings, workspace, script, results, concurrency=4, resume=True)
    )
    assert second.done == 4 and second.ok
    for result in second.results:
        session = sessions[result.session_id or ""]
        users = [m.text for m in session.messages if m.role == "user"]
        wanted = [f"{result.name} turn {t}" for t in (1, 2, 3)]
        # every message once, in order: a turn cancelled in flight after its message
        # was recorded is answered on resume, its message not recorded again
        assert users == wanted
        assert session.messages[-1].text == expected_answer(settings, wanted[-1])
        assert result.final_answer == session.messages[-1].text


def test_resume_refuses_a_changed_script_and_a_missing_state(
    tmp_path: Path, workspace: Path
) -> None:
    settings = simulated_settings()
    results = tmp_path / "r.results.jsonl"
    with pytest.raises(BatchStateError, match="no stopped batch to resume"):
        asyncio.run(run_batch(settings, workspace, small_script(1, 1), results, resume=True))
    report, _ = asyncio.run(run_batch(settings, workspace, small_script(2, 1), results))
    assert report.done == 2
    with pytest.raises(BatchStateError, match="changed since the batch"):
        asyncio.run(run_batch(settings, workspace, small_script(3, 1), results, resume=True))
    again, _ = asyncio.run(run_batch(settings, workspace, small_script(2, 1), results, resume=True))
    assert again.done == 2 and again.turns == 2  # nothing left to do, nothing sent twice


def test_a_running_batch_state_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "x.results.jsonl.state"
    journal = BatchJournal.open(path)
    try:
        with pytest.raises(BatchStateError, match="in use by another"):
            BatchJournal.open(path)
    finally:
        journal.close()
    BatchJournal.open(path).close()
    with pytest.raises(BatchStateError, match="cannot open the batch state"):
        BatchJournal.open(tmp_path / "missing" / "x.state")


def test_retries_of_a_failed_conversation_are_journaled(tmp_path: Path) -> None:
    """Retries no finished turn carried (a start tried again, then a failure) are
    kept by the conversation's end entry, so a resumed batch still reports them."""
    path = tmp_path / "x.results.jsonl.state"
    journal = BatchJournal.open(path)
    try:
        journal.append(TurnEntry(id="1.1.1", turn=1, answer="A", retries=1))
        journal.append(EndEntry(id="1.1.1", status="failed", error="died", retries=2))
        state = ConversationState()
        for entry in journal.read():
            assert isinstance(entry, TurnEntry | EndEntry)
            state.apply(entry)
    finally:
        journal.close()
    result = state.result(small_script(1, 1).conversations[0])
    assert (result.status, result.turns, result.retries) == ("failed", 1, 3)


def test_a_torn_last_journal_line_is_dropped(tmp_path: Path, workspace: Path) -> None:
    settings = simulated_settings()
    script = small_script(3, 2, name="torn")
    results = tmp_path / "torn.results.jsonl"
    progress, holder = stop_after(1)
    asyncio.run(
        run_batch(
            settings,
            workspace,
            script,
            results,
            concurrency=1,
            on_progress=progress,
            runner_hook=holder.append,
        )
    )
    state = state_path_for(results)
    with state.open("ab") as handle:
        handle.write(b'{"type": "garbage"}\n{"type": "turn", "id": "1.1.1", "tu')
    report, sessions = asyncio.run(run_batch(settings, workspace, script, results, resume=True))
    assert_recorded_exactly(settings, script, report, sessions)
    assert state.read_bytes().endswith(b"\n")


def test_failed_conversation_is_reported_and_run_again_on_resume(
    tmp_path: Path, workspace: Path
) -> None:
    with FakeOllama() as server:
        settings = simulated_settings()
        settings.provider.name = "ollama"
        settings.provider.model = "llama3.2:latest"
        settings.provider.ollama.host = server.url
        script = small_script(3, 1, name="failing")
        results = tmp_path / "failing.results.jsonl"
        server.fail_next("/api/chat", 400, "model exploded")
        report, _ = asyncio.run(run_batch(settings, workspace, script, results, concurrency=1))
        assert report.failed == 1 and report.done == 2
        failed = next(r for r in report.results if r.status == "failed")
        assert failed.error_type == "ProviderError"
        assert "model exploded" in (failed.error or "")
        assert failed.turns == 0
        failure = batch_failure(report)
        assert failure is not None and failure.exit_code == 6
        assert failed.conversation_id in str(failure)
        assert [r.status for r in read_results(results)].count("failed") == 1

        again, _ = asyncio.run(
            run_batch(settings, workspace, script, results, concurrency=1, resume=True)
        )
        assert again.done == 3 and again.failed == 0
        rerun = next(r for r in again.results if r.conversation_id == failed.conversation_id)
        assert rerun.session_id == failed.session_id
        assert rerun.final_answer.startswith("You said:")
        assert [r.status for r in read_results(results)] == ["done"] * 3


def test_loop_and_limit_events_are_in_the_results(tmp_path: Path, workspace: Path) -> None:
    settings = simulated_settings(tool_call_every=1)
    settings.services.loop_detection.max_turns = 4
    script = small_script(2, 2, name="loops")
    results = tmp_path / "loops.results.jsonl"
    report, sessions = asyncio.run(run_batch(settings, workspace, script, results))
    assert report.done == 2
    assert report.stopped_turns == 4
    assert report.loop_events >= 4
    for result in report.results:
        assert result.stopped_turns == 2
        assert {e.action for e in result.events} >= {"stop"}
        assert {e.turn for e in result.events} == {1, 2}
        assert result.tool_calls > 0
    failure = batch_failure(report)
    assert failure is not None and failure.exit_code == 5
    assert len(sessions) == 2


def test_concurrency_must_be_positive(workspace: Path, tmp_path: Path) -> None:
    settings = simulated_settings()

    async def build() -> None:
        runtime = create_runtime(settings, workspace, kind="inprocess")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            BatchRunner(coordinator, small_script(1, 1), tmp_path / "r.jsonl", concurrency=0)
        finally:
            await runtime.shutdown()

    with pytest.raises(OllmError, match="at least 1"):
        asyncio.run(build())


@pytest.mark.ray
@pytest.mark.parametrize(
    "held", ["/api/show", "/api/chat"], ids=["during-the-start", "during-the-first-answer"]
)
def test_a_turn_hit_by_an_actor_death_is_retried(
    ray_instance: None, tmp_path: Path, workspace: Path, held: str
) -> None:
    """The provider is killed while its very first request of that kind is held
    at the model server: during a conversation's start (``/api/show``, the model's
    window) or its first answer. The start or turn is tried again once Ray has
    restarted the provider; every message is recorded once, nothing is lost."""
    script = small_script(2, 2, name="retried")
    results = tmp_path / "retried.results.jsonl"

    async def run(server: FakeOllama) -> tuple[BatchReport, dict[str, Session]]:
        settings = simulated_settings()
        settings.provider.name = "ollama"
        settings.provider.model = "llama3.2:latest"
        settings.provider.ollama.host = server.url
        runtime = create_runtime(settings, workspace, kind="ray")
        await runtime.start()
        try:
            coordinator = Coordinator(runtime, settings, workspace=workspace)
            runner = BatchRunner(coordinator, script, results, concurrency=2)
            release = threading.Event()
            server.hold_next(held, release)

            async def kill_while_held() -> None:
                await asyncio.to_thread(
                    wait_until, lambda: server.received(held), what=f"a request to {held}"
                )
                await runtime.provider.kill()

            killer = asyncio.ensure_future(kill_while_held())
            try:
                report = await runner.run()
            finally:
                release.set()  # never answered before the provider died: nothing raced
            await killer
            tagged = await runtime.recording.call(RecordingShell.list_sessions, tag=script.name)
            sessions = {
                summary.session_id: await runtime.recording.call(
                    RecordingShell.get_session, summary.session_id
                )
                for summary in tagged
            }
            return report, sessions
        finally:
            await runtime.shutdown()

    with FakeOllama() as server:
        report, sessions = asyncio.run(run(server))
    assert [(r.status, r.error) for r in report.results] == [("done", None)] * 2
    assert sum(r.retries for r in report.results) >= 1
    # a start cut short leaves no session behind: one per conversation
    assert set(sessions) == {r.session_id for r in report.results}
    for result in report.results:
        session = sessions[result.session_id or ""]
        users = [m.text for m in session.messages if m.role == "user"]
        assert users == [f"{result.name} turn 1", f"{result.name} turn 2"]
        assert result.final_answer == f"You said: {result.name} turn 2"


def _conversation(*pairs: tuple[str, object]) -> list[SessionMessage]:
    made: list[SessionMessage] = []
    for role, content in pairs:
        if role == "call":
            made.append(
                SessionMessage(role="assistant", parts=[ToolCallPart(id="c", name="read_file")])
            )
        elif role == "tool":
            made.append(
                SessionMessage(
                    role="tool",
                    parts=[ToolResultPart(tool_call_id="c", name="read_file", content="x")],
                )
            )
        else:
            made.append(SessionMessage(role=role, parts=[TextPart(text=str(content))]))
    return made


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        ([], []),
        ([("user", "a")], []),  # asked, not answered
        ([("user", "a"), ("assistant", "A")], [(1, "A")]),
        ([("user", "a"), ("assistant", "A"), ("user", "b")], [(1, "A")]),
        (
            [
                ("user", "a"),
                ("call", ""),
                ("tool", ""),
                ("assistant", "A"),
                ("user", "b"),
                ("assistant", "B"),
            ],
            [(1, "A"), (2, "B")],
        ),
        ([("user", "a"), ("call", ""), ("tool", "")], []),  # stopped among its tools
        ([("user", "a"), ("call", "")], []),
        ([("user", "x"), ("assistant", "X")], []),  # not the script's conversation
        ([("user", "a"), ("assistant", "A"), ("user", "a"), ("assistant", "A")], [(1, "A")]),
        (
            [
                ("user", "a"),
                ("assistant", "A"),
                ("user", "b"),
                ("assistant", "B"),
                ("user", "c"),
                ("assistant", "C"),
            ],
            [(1, "A"), (2, "B")],  # beyond the script
        ),
    ],
)
def test_answered_turns_reads_the_turns_a_session_finished(
    pairs: list[tuple[str, object]], expected: list[tuple[int, str]]
) -> None:
    assert answered_turns(_conversation(*pairs), ["a", "b"]) == expected
