"""Checkpoints in the session file: recorded with each compression, resumed
faithfully, never dropped at exit, ignored when the file no longer matches,
restored from snapshots, and shown by view and export.

The pipeline runs in-process with the simulated model (a real coordinator, real
session files, real snapshot files); the summarizer is a function the test
controls.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.cli.app import app
from ollm_cli.config.settings import CompressionSettings, OllmSettings, SessionSettings
from ollm_cli.pipeline.compression import (
    ActiveContext,
    ChatCompressionService,
    CompressionResult,
    SnapshotManager,
    TokenCounter,
)
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.recording import ChatRecordingService, ExportFormat, render
from ollm_cli.pipeline.recording._checkpoints import messages_digest, resume_point
from ollm_cli.pipeline.recording._document import SessionDocument
from ollm_cli.pipeline.records import (
    CompressionEvent,
    Session,
    SessionMessage,
    ToolCallPart,
    ToolResultPart,
)
from ollm_cli.pipeline.runtime import LocalService, Runtime, create_runtime
from tests.compression.conversations import SYSTEM_PROMPT, WORDS, fake_summarizer

SUMMARY = "## Goal\nKeep the notes. SUMMARY-MARK\n## State of the work\nNotes taken."

Summarizer = Callable[[str, int], str]


def settings_for(home: Path, *, window: int = 2048) -> OllmSettings:
    """Sessions and snapshots where ``OLLM_HOME`` puts them, so the CLI sees them too."""
    settings = OllmSettings()
    settings.provider.name = "simulated"
    settings.provider.simulated.latency_ms = 0
    settings.provider.simulated.output_tokens = 60
    settings.provider.simulated.context_window = window
    settings.services.context.load_project_files = False
    settings.services.compression.preserve_recent = 128
    settings.tools.default_approval = "deny"
    settings.tools.approval = dict.fromkeys(settings.tools.approval, "deny")
    return settings


class Pipeline:
    """An in-process runtime and coordinator whose summarizer the test sets."""

    def __init__(self, settings: OllmSettings, home: Path) -> None:
        self.settings = settings
        self.home = home
        self.runtime: Runtime = create_runtime(settings, home, kind="inprocess")
        self.coordinator: Coordinator

    async def start(self, summarize: Summarizer) -> Coordinator:
        await self.runtime.start()
        for service in self.runtime.compression:
            assert isinstance(service, LocalService)
            service.obj.service.summarize_fn = summarize
        self.coordinator = Coordinator(self.runtime, self.settings, workspace=self.home)
        return self.coordinator

    async def stop(self) -> None:
        for sid in list(self.coordinator.conversations):
            await self.coordinator.end_session(sid)
        await self.runtime.shutdown()


@pytest.fixture
def home(ollm_home: Path) -> Path:
    ollm_home.mkdir(parents=True, exist_ok=True)
    return ollm_home


@pytest.fixture
def pipeline(home: Path) -> Callable[..., Pipeline]:
    def make(window: int = 2048) -> Pipeline:
        return Pipeline(settings_for(home, window=window), home)

    return make


def session_of(home: Path, sid: str) -> Session:
    settings = settings_for(home)
    with ChatRecordingService(settings.services.session) as store:
        return store.get_session(sid)


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def text(turn: int) -> str:
    return f"turn {turn}: " + " ".join(f"the parser reads value {turn * 31 + k}" for k in range(25))


async def turns_until(coordinator: Coordinator, sid: str, compressions: int) -> int:
    """Run turns until ``compressions`` were recorded; returns how many turns ran."""
    turn = 0
    while True:
        await coordinator.run_turn(sid, text(turn))
        turn += 1
        await coordinator.finish_compression(sid)
        recorded = await coordinator.runtime.recording.call(RecordingShell.get_session, sid)
        if recorded.metadata.compression_count >= compressions:
            return turn
        assert turn < 60, "compression never happened"


# -- recorded, resumed -----------------------------------------------------------------


def test_a_resumed_session_continues_from_its_checkpoint_exactly(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        first = pipeline()
        coordinator = await first.start(lambda prompt, limit: SUMMARY)
        sid = await coordinator.start_session()
        await turns_until(coordinator, sid, 2)
        live = coordinator.conversations[sid].context
        await first.stop()

        session = session_of(home, sid)
        assert session.metadata.compression_count == len(session.metadata.compression_history) == 2
        event = session.metadata.compression_history[-1]
        assert event.checkpoint is not None and event.checkpoint.summary == SUMMARY
        assert event.strategy == "hybrid" and event.trigger == "auto"
        assert all(isinstance(e, int) for e in event.checkpoint.head)  # user messages, by position

        second = pipeline()
        again = await second.start(lambda prompt, limit: SUMMARY)
        await again.start_session(resume=sid)
        resumed = again.conversations[sid].context
        assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in live.messages]
        assert [c.text for c in resumed.checkpoints] == [c.text for c in live.checkpoints]
        assert (resumed.covers_through, resumed.covered_head) == (
            live.covers_through,
            live.covered_head,
        )

    run(scenario)


def test_a_compression_running_at_exit_is_finished_and_recorded(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        started = threading.Event()
        release = threading.Event()

        def slow(prompt: str, limit: int) -> str:
            started.set()
            release.wait(30)
            return SUMMARY

        p = pipeline()
        coordinator = await p.start(slow)
        sid = await coordinator.start_session()
        turn = 0
        while not started.is_set():
            await coordinator.run_turn(sid, text(turn))
            turn += 1
            await asyncio.sleep(0)
            assert turn < 60
        pending = coordinator.compression_pending(sid)
        assert pending is not None and "compression" in pending
        ending = asyncio.ensure_future(coordinator.end_session(sid))
        release.set()
        await ending  # the old code cancelled the compression here
        await p.stop()
        session = session_of(home, sid)
        assert session.metadata.compression_count == 1
        checkpoint = session.metadata.compression_history[0].checkpoint
        assert checkpoint is not None and checkpoint.summary == SUMMARY

    run(scenario)


def test_a_compression_longer_than_finish_on_exit_is_given_up_with_a_warning(
    pipeline: Callable[..., Pipeline], home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        started = threading.Event()
        release = threading.Event()

        def stuck(prompt: str, limit: int) -> str:
            started.set()
            release.wait(30)
            return SUMMARY

        p = pipeline()
        p.settings.services.compression.finish_on_exit_s = 0.2
        coordinator = await p.start(stuck)
        sid = await coordinator.start_session()
        turn = 0
        while not started.is_set():
            await coordinator.run_turn(sid, text(turn))
            turn += 1
            await asyncio.sleep(0)
            assert turn < 60
        with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.coordinator"):
            await coordinator.end_session(sid)
        release.set()
        await p.stop()
        assert "did not finish within" in caplog.text and "finishOnExitS" in caplog.text
        assert session_of(home, sid).metadata.compression_count == 0

    run(scenario)


def test_a_refused_summary_is_recorded_as_a_truncation_with_its_reason(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        p = pipeline()
        coordinator = await p.start(lambda prompt, limit: "")
        sid = await coordinator.start_session()
        await turns_until(coordinator, sid, 1)
        await p.stop()
        [event] = session_of(home, sid).metadata.compression_history[:1]
        assert event.strategy == "truncate" and event.requested_strategy == "hybrid"
        assert event.fallback == "the summary was empty"
        assert event.tokens_after < event.tokens_before

    run(scenario)


def test_compress_now_records_the_focus(pipeline: Callable[..., Pipeline], home: Path) -> None:
    async def scenario() -> None:
        prompts: list[str] = []

        def remember(prompt: str, limit: int) -> str:
            prompts.append(prompt)
            return SUMMARY

        p = pipeline(window=8192)
        coordinator = await p.start(remember)
        sid = await coordinator.start_session()
        for turn in range(4):
            await coordinator.run_turn(sid, text(turn))
        result = await coordinator.compress_now(sid, "the parser values")
        assert result is not None and result.reduced
        await p.stop()
        [event] = session_of(home, sid).metadata.compression_history
        assert (event.trigger, event.focus) == ("manual", "the parser values")
        assert "focus on: the parser values" in prompts[-1]

    run(scenario)


# -- a checkpoint that no longer matches -------------------------------------------------


def test_a_checkpoint_that_no_longer_matches_the_file_is_ignored_and_replaced(
    pipeline: Callable[..., Pipeline], home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        first = pipeline()
        coordinator = await first.start(lambda prompt, limit: SUMMARY)
        sid = await coordinator.start_session()
        await turns_until(coordinator, sid, 1)
        await first.stop()

        path = home / "sessions" / f"{sid}.json"
        data = orjson.loads(path.read_bytes())
        data["messages"][1]["parts"][0]["text"] = "an answer edited by hand"
        path.write_bytes(orjson.dumps(data))

        second = pipeline()
        again = await second.start(lambda prompt, limit: SUMMARY)
        with caplog.at_level(logging.WARNING, logger="ollm_cli.pipeline.coordinator"):
            await again.start_session(resume=sid)
        assert "checkpoint is not used" in caplog.text and "changed since" in caplog.text
        context = again.conversations[sid].context
        assert context.covers_through == 0 and not context.checkpoints  # the whole history
        assert context.messages[1].text == "an answer edited by hand"
        await again.run_turn(sid, text(99))
        await again.finish_compression(sid)
        await second.stop()
        history = session_of(home, sid).metadata.compression_history
        assert len(history) == 2  # a new checkpoint, made from the file as it is now
        point = resume_point(orjson.loads(path.read_bytes()))
        assert point.problem is None and point.checkpoint == history[-1].checkpoint

    run(scenario)


def test_a_checkpoint_covering_more_than_the_file_is_not_used(tmp_path: Path) -> None:
    settings = SessionSettings(data_dir=tmp_path / "sessions", group_commit_ms=0)
    with ChatRecordingService(settings) as store:
        sid = store.create_session("m", "ollama")
        for n in range(4):
            store.record_message(sid, SessionMessage.user(f"u{n}"))
        store.record_compression(
            sid,
            CompressionEvent(
                strategy="truncate",
                tokens_before=10,
                tokens_after=5,
                checkpoint={"coversThrough": 9, "head": []},
            ),
        )
        store.close_session(sid)
        history = store.get_session(sid).metadata.compression_history
        assert history[-1].checkpoint is None  # not kept: it covered messages not there
        point = store.open_for_resume(sid)
        assert point.checkpoint is None and [m.text for m in point.rest] == [
            "u0",
            "u1",
            "u2",
            "u3",
        ]
        store.close_session(sid)


# -- snapshots ---------------------------------------------------------------------------


def test_snapshot_restore_is_what_the_next_resumes_use(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        first = pipeline()
        coordinator = await first.start(lambda prompt, limit: SUMMARY)
        sid = await coordinator.start_session()
        await turns_until(coordinator, sid, 1)
        await first.stop()
        manager = SnapshotManager(first.settings.snapshots)
        snapshots = manager.list_snapshots(sid)
        assert snapshots and snapshots[0].reason == "auto"  # taken before the compression
        chosen = snapshots[-1]
        captured = manager.restore_snapshot(chosen.id)

        outcome = CliRunner().invoke(app, ["snapshots", "restore", chosen.id])
        assert outcome.exit_code == 0, outcome.output

        for _ in range(2):  # the restore, then a later resume that still uses it
            p = pipeline()
            p.settings.services.compression.enabled = False  # it would compress it again
            again = await p.start(lambda prompt, limit: SUMMARY)
            await again.start_session(resume=sid)
            context = again.conversations[sid].context
            assert [m.to_dict() for m in context.messages] == [
                m.to_dict() for m in captured.messages
            ]
            await p.stop()
        session = session_of(home, sid)
        restores = [e for e in session.metadata.compression_history if e.trigger == "restore"]
        assert len(restores) == 1
        assert session.metadata.compression_count == len(session.metadata.compression_history) - 1

    run(scenario)


def test_an_automatic_snapshot_is_taken_at_auto_threshold_without_compression(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        p = pipeline()
        p.settings.services.compression.enabled = False
        p.settings.snapshots.auto_threshold = 0.5
        coordinator = await p.start(lambda prompt, limit: SUMMARY)
        sid = await coordinator.start_session()
        manager = SnapshotManager(p.settings.snapshots)
        turn = 0
        while not manager.list_snapshots(sid):
            await coordinator.run_turn(sid, text(turn))
            await asyncio.gather(*coordinator.conversations[sid].background)
            turn += 1
            assert turn < 20
        [snapshot] = manager.list_snapshots(sid)
        assert snapshot.reason == "auto" and "of the window" in snapshot.summary
        used = coordinator.conversations[sid].context.message_tokens(coordinator.counter)
        assert used >= 0.5 * 2048 * 0.9  # at the threshold, not before it
        await coordinator.run_turn(sid, text(turn))  # still above: no second snapshot
        await asyncio.gather(*coordinator.conversations[sid].background)
        assert len(manager.list_snapshots(sid)) == 1

    run(scenario)


# -- visible -----------------------------------------------------------------------------


def test_view_and_exports_show_each_compression_and_its_summary(
    pipeline: Callable[..., Pipeline], home: Path
) -> None:
    async def scenario() -> None:
        p = pipeline()
        coordinator = await p.start(lambda prompt, limit: SUMMARY)
        sid = await coordinator.start_session()
        await turns_until(coordinator, sid, 2)
        await p.stop()
        session = session_of(home, sid)
        markdown = render(session, ExportFormat.MARKDOWN)
        assert markdown.count("**Compression ") == 2 and markdown.count("SUMMARY-MARK") == 2
        assert "stands for messages 1-" in markdown
        html = render(session, ExportFormat.HTML)
        assert html.count('<aside class="compression">') == 2 and "SUMMARY-MARK" in html
        exported = orjson.loads(render(session, ExportFormat.JSON))
        assert exported["metadata"]["compressionHistory"][0]["checkpoint"]["summary"] == SUMMARY

        runner = CliRunner()
        env = {"OLLM_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "160"}
        plain = runner.invoke(app, ["sessions", "view", sid[:8]], env=env)
        assert plain.exit_code == 0, plain.output
        assert plain.output.count("Compression ") == 2 and "SUMMARY-MARK" not in plain.output
        shown = runner.invoke(app, ["sessions", "view", sid[:8], "--summaries"], env=env)
        assert shown.exit_code == 0, shown.output
        assert shown.output.count("SUMMARY-MARK") == 2

    run(scenario)


# -- property: resuming gives the same active context ----------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChatRecordingService]:
    settings = SessionSettings(data_dir=tmp_path / "sessions", max_sessions=0, group_commit_ms=0)
    with ChatRecordingService(settings) as opened:
        yield opened


@st.composite
def sized_conversations(draw: st.DrawFn) -> list[SessionMessage]:
    """Conversations whose answers and tool results are large enough to compress:
    exchanges of drawn sizes, texts from the test vocabulary."""
    messages: list[SessionMessage] = []
    for i in range(draw(st.integers(2, 16))):
        seed = draw(st.integers(0, 1000))

        def words(count: int, seed: int = seed) -> str:
            return " ".join(WORDS[(seed + k * 7) % len(WORDS)] for k in range(count))

        messages.append(SessionMessage.user(f"question {i}: {words(draw(st.integers(1, 20)))}"))
        tool_words = draw(st.integers(0, 300))
        if tool_words:
            call = ToolCallPart(id=f"c{i}", name="read_file", args={"path": f"src/m{i}.py"})
            messages.append(SessionMessage(role="assistant", parts=[call]))
            result = ToolResultPart(
                tool_call_id=f"c{i}", name="read_file", content=words(tool_words)
            )
            messages.append(SessionMessage(role="tool", parts=[result]))
        messages.append(SessionMessage.assistant(words(draw(st.integers(5, 200)))))
    return messages


@given(
    messages=sized_conversations(),
    plan=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 3)), min_size=1, max_size=5),
    strategy=st.sampled_from(["hybrid", "summarize", "truncate"]),
    summary_ok=st.booleans(),
    window=st.integers(2048, 4096),
)
def test_property_resuming_gives_the_context_of_the_process_that_made_it(
    store: ChatRecordingService,
    messages: list[SessionMessage],
    plan: list[tuple[int, int]],
    strategy: str,
    summary_ok: bool,
    window: int,
) -> None:
    """For any turns and compressions (each applied after 0 to 3 more messages were
    recorded, as a background compression is), the context rebuilt from the file is
    the one the process held: same messages, same checkpoint; every user message is
    in the file and in the context."""
    counter = TokenCounter(persist=False)
    summarize = fake_summarizer if summary_ok else (lambda prompt, limit: "")
    service = ChatCompressionService(
        CompressionSettings(strategy=strategy, preserve_recent=96),
        counter,
        summarize,
    )
    sid = store.create_session("m", "ollama")
    live = ActiveContext(system_prompt=SYSTEM_PROMPT)
    queue = list(messages)

    def record(count: int) -> None:
        for message in queue[:count]:
            store.record_message(sid, message)
            live.messages.append(message)
        del queue[:count]

    compressions = 0
    for before, later in plan:
        record(before)
        result: CompressionResult = service.compress(live, window=window, force=True)
        record(later)
        if result.reduced:
            store.record_compression(sid, result.event)
            applied = result.apply(live)
            assert applied is not None
            live = applied
            compressions += 1
    record(len(queue))
    event(f"compressions recorded: {min(compressions, 2)}+")

    point = store.open_for_resume(sid)
    assert point.problem is None
    resumed = ActiveContext.from_resume_point(point, SYSTEM_PROMPT)
    assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in live.messages]
    assert [c.text for c in resumed.checkpoints] == [c.text for c in live.checkpoints]
    assert (resumed.covers_through, resumed.covered_head) == (
        live.covers_through,
        live.covered_head,
    )
    users = [m.to_dict() for m in messages if m.role == "user"]
    in_file = [m.to_dict() for m in store.get_session(sid).messages if m.role == "user"]
    in_context = [m.to_dict() for m in resumed.messages if m.role == "user"]
    assert in_file == users and in_context == users
    store.close_session(sid)


def test_the_digest_is_of_the_file_data() -> None:
    messages = [SessionMessage.user("a"), SessionMessage.assistant("b")]
    data = SessionDocument.from_session(
        Session(
            session_id="00000000-0000-4000-8000-000000000000",
            start_time=messages[0].timestamp,
            last_activity=messages[0].timestamp,
            model="m",
            provider="p",
            messages=messages,
        )
    ).data
    assert messages_digest(data["messages"]) == messages_digest([m.to_dict() for m in messages])
    assert messages_digest(data["messages"][:1]) != messages_digest(data["messages"])


# -- rolling summaries -------------------------------------------------------------------


def test_rolling_summaries_keep_one_checkpoint_within_summary_max_tokens() -> None:
    """A long conversation compressed again and again: each summary merges the
    previous one with the newer messages (the previous summary is in its prompt),
    there is one checkpoint, and it never grows past ``summaryMaxTokens`` even
    when the model writes more than asked."""
    counter = TokenCounter(persist=False)
    prompts: list[str] = []

    def verbose(prompt: str, limit: int) -> str:
        prompts.append(prompt)
        number = len(prompts)
        facts = " ".join(f"fact {k}.{number} is {WORDS[k % len(WORDS)]}" for k in range(limit))
        return f"## Goal\nROLL-{number} {facts}"

    settings = CompressionSettings(preserve_recent=128, summary_max_tokens=200)
    service = ChatCompressionService(settings, counter, verbose)
    context = ActiveContext(system_prompt=SYSTEM_PROMPT)
    for turn in range(120):
        context.messages.append(SessionMessage.user(f"question {turn}"))
        context.messages.append(
            SessionMessage.assistant(" ".join(WORDS[(turn + k) % len(WORDS)] for k in range(80)))
        )
        if service.should_compress(context, window=4096):
            result = service.compress(context, window=4096)
            context = result.apply(context) or context
    assert len(prompts) >= 5
    assert len(context.checkpoints) == 1
    summary = context.checkpoints[0].text
    assert f"ROLL-{len(prompts)}" in summary
    assert counter.count_text(summary.split("\n", 1)[1]) <= settings.summary_max_tokens
    assert f"ROLL-{len(prompts) - 1}" in prompts[-1]  # the previous summary was merged


# -- the chat's lines and Ctrl-C at exit ------------------------------------------------------


def test_the_chat_says_when_a_compression_fell_back_with_tokens_before_and_after() -> None:
    from ollm_cli.cli.chat_repl import compression_line
    from ollm_cli.pipeline.events import CompressionFinished

    done = CompressionFinished(
        session_id="s", strategy="hybrid", tokens_before=900, tokens_after=300
    )
    assert compression_line(done) == "[dim]compressed (hybrid): 900 → 300 tokens[/]"
    fell = CompressionFinished(
        session_id="s",
        strategy="truncate",
        tokens_before=900,
        tokens_after=500,
        fallback="the summary was empty",
    )
    line = compression_line(fell)
    assert "fell back to truncate" in line and "the summary was empty" in line
    assert "900 → 500 tokens" in line


def test_ctrl_c_while_waiting_at_exit_skips_the_compression(
    pipeline: Callable[..., Pipeline], home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import os
    import signal

    from rich.console import Console

    from ollm_cli.cli.chat_repl import finish_compressions
    from ollm_cli.cli.loop_thread import LoopThread

    started = threading.Event()
    release = threading.Event()

    def stuck(prompt: str, limit: int) -> str:
        started.set()
        release.wait(60)
        return SUMMARY

    loop = LoopThread()
    p = pipeline()
    try:
        coordinator = loop.run(p.start(stuck))
        sid = loop.run(coordinator.start_session())
        turn = 0
        while not started.is_set():
            loop.run(coordinator.run_turn(sid, text(turn)))
            turn += 1
            assert turn < 60
        pending = coordinator.compression_pending(sid)
        assert pending is not None
        waiting = threading.Event()
        finish = coordinator.finish_compression

        async def finish_noted(session_id: str) -> bool:
            waiting.set()  # the command waits behind its spinner from here
            return await finish(session_id)

        monkeypatch.setattr(coordinator, "finish_compression", finish_noted)

        def press_ctrl_c() -> None:
            assert waiting.wait(60), "the command never waited for the compression"
            os.kill(os.getpid(), signal.SIGINT)

        output = io.StringIO()
        err = Console(file=output, force_terminal=False, width=120)
        presser = threading.Thread(target=press_ctrl_c)
        presser.start()
        finish_compressions(loop, coordinator, err)
        presser.join()
        assert "compression skipped" in output.getvalue()
        assert coordinator.compression_pending(sid) is None
        loop.run(p.stop())
    finally:
        release.set()
        loop.close()
    assert session_of(home, sid).metadata.compression_count == 0
