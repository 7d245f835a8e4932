"""Compaction that survives the process: one-shot turns (``ollm run --continue -p``),
each a new process, against a real HTTP server speaking Ollama's protocol with a
2,048-token window that the conversation exceeds several times.

The server writes the summaries itself (a short structured text naming the
summary's number), answers other turns briefly, and reports as prompt tokens
what tiktoken counts of the request, so that OLLM's estimate and the "model"
agree. Every request it receives is checked against the window.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.actors.shell import ShellBase
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.compression import TokenCounter
from ollm_cli.pipeline.compression._active_context import SUMMARY_MARKER, ActiveContext
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._checkpoints import resume_point
from ollm_cli.pipeline.recording._document import SessionDocument
from ollm_cli.pipeline.records import Session
from tests.fake_ollama import FakeModel, FakeOllama, Reply

MODEL = "llama3.2:latest"
WINDOW = 2048
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
SUMMARY_PROMPT_START = "You compress the earlier part of a conversation"
RULE = "RULE-7: always answer in French."

_counter = TokenCounter(persist=False)


def request_tokens(body: dict[str, Any]) -> int:
    """What tiktoken counts of a chat request: every message, and the tool schemas."""
    total = 0
    for message in body.get("messages") or []:
        total += 4 + _counter.count_text(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            total += _counter.count_text(orjson.dumps(call).decode())
    if body.get("tools"):
        total += _counter.count_text(orjson.dumps(body["tools"]).decode())
    return total


class Model:
    """The fake server's answers: numbered summaries, short replies, honest counts."""

    def __init__(self, server: FakeOllama) -> None:
        self.server = server
        self.summaries = 0
        self.lock = threading.Lock()
        server.default_reply = self.reply

    def reply(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages") or []
        last = str(messages[-1].get("content") or "") if messages else ""
        tokens = request_tokens(body)
        if last.startswith(SUMMARY_PROMPT_START):
            with self.lock:
                self.summaries += 1
                number = self.summaries
            text = (
                f"## Goal\nSUMMARY-{number}: the user is dictating notes on the project.\n"
                "## State of the work\nThe notes were received and acknowledged.\n"
                "## Next steps\nKeep acknowledging."
            )
            return Reply.text(text, prompt_eval_count=tokens)
        words = last.split()
        answer = "Noted. " + " ".join(words[2:70]) + ". I will keep that in mind for the project."
        return Reply.text(answer, prompt_eval_count=tokens)

    def chat_requests(self) -> list[dict[str, Any]]:
        return self.server.chat_requests

    def turn_requests(self) -> list[dict[str, Any]]:
        return [
            b for b in self.chat_requests() if not is_summary_request(b) and not is_title_request(b)
        ]


def is_title_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and str(messages[-1].get("content") or "").startswith("Write a title")


def is_summary_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and str(messages[-1].get("content") or "").startswith(
        SUMMARY_PROMPT_START
    )


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama([FakeModel(name=MODEL, context_length=WINDOW)]) as fake:
        yield fake


@pytest.fixture
def model(server: FakeOllama) -> Model:
    return Model(server)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "OLLM.md").write_text(f"Project rules.\n{RULE}\n")
    # a chat without tools: their schemas alone would take half of a 2,048-token window
    denied = ", ".join(
        f"{name}: deny"
        for name in ("shell", "write_file", "edit_file", "read_file", "list_files", "glob", "grep")
    )
    (folder / ".ollm").mkdir()
    (folder / ".ollm" / "config.yaml").write_text(
        f"tools:\n  defaultApproval: deny\n  approval: {{{denied}}}\n"
    )
    return folder


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
            "OLLM_SERVICES__COMPRESSION__PRESERVE_RECENT": "256",
            "NO_COLOR": "1",
            "COLUMNS": "120",
        }
    )
    return values


_PROSE_TEXT = (
    "the parser reads the configuration file and the build runs the tests when the value is "
    "missing the service returns an error so we keep a list of the open questions and the "
    "decisions we made about the cache and the retry timeout"
)
_PROSE = _PROSE_TEXT.split()


def note(turn: int) -> str:
    """A 1,200-character user turn of prose (the issue's reproduction)."""
    words = [f"note{turn}:"]
    k = turn
    while len(" ".join(words)) < 1200:
        words.append(_PROSE[k % len(_PROSE)])
        k += 7
    return " ".join(words)[:1200]


def one_turn(env: dict[str, str], cwd: Path, text: str, *, first: bool) -> None:
    args = [*OLLM, "run", "-p", text] if first else [*OLLM, "run", "--continue", "-p", text]
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr


def store() -> ChatRecordingService:
    settings = OllmSettings()
    return ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )


def only_session() -> Session:
    with store() as opened:
        [summary] = opened.list_sessions()
        return opened.get_session(summary.session_id)


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(
        str(m.get("content") or "") for m in body.get("messages") or [] if m.get("role") == "system"
    )


def summary_numbers(body: dict[str, Any]) -> list[int]:
    text = system_text(body)
    return [int(part.split(":")[0]) for part in text.split("SUMMARY-")[1:]]


@pytest.mark.slow
def test_one_shot_turns_keep_and_use_the_summaries_of_earlier_processes(
    model: Model, env: dict[str, str], workspace: Path
) -> None:
    turns = 10
    for turn in range(turns):
        one_turn(env, workspace, note(turn), first=turn == 0)

    session = only_session()
    meta = session.metadata
    # the file keeps every turn, the history every compression with its checkpoint
    assert [m.text for m in session.messages if m.role == "user"] == [note(t) for t in range(turns)]
    assert len(session.messages) == 2 * turns
    assert meta.compression_count == len(meta.compression_history) >= 2
    assert model.summaries >= 2
    summarized = [e for e in meta.compression_history if e.strategy != "truncate"]
    assert summarized, [e.fallback for e in meta.compression_history]
    for event in meta.compression_history:
        assert event.checkpoint is not None and event.checkpoint.fingerprint
        assert event.model == MODEL
    # a later process's request carries a summary that an earlier process made
    turn_requests = model.turn_requests()
    assert len(turn_requests) == turns
    carried = [summary_numbers(body) for body in turn_requests]
    assert any(numbers for numbers in carried[2:]), carried
    # ... and the latest one recorded is what the last request was built on
    latest = meta.compression_history[-1].checkpoint
    assert latest is not None and latest.summary is not None
    # no request, turn or summary, exceeds the window
    for body in model.chat_requests():
        assert request_tokens(body) <= WINDOW
        assert body["options"]["num_ctx"] == WINDOW
    # the OLLM.md rule is in every request after every compaction (three at least)
    assert meta.compression_count >= 3
    for body in turn_requests:
        assert RULE in system_text(body)
    # user messages are never summarized away: those the checkpoint covers are in its head
    point = resume_point(SessionDocument.from_session(session).data)
    assert point.checkpoint is not None and point.problem is None
    context = ActiveContext.from_resume_point(point)
    users_in_context = [m.text for m in context.messages if m.role == "user"]
    assert users_in_context == [note(t) for t in range(turns)][-len(users_in_context) :]
    assert len(context.checkpoints) == 1 and SUMMARY_MARKER in context.checkpoints[0].text


@pytest.mark.slow
def test_a_process_killed_after_a_compression_resumes_from_its_checkpoint(
    model: Model, env: dict[str, str], workspace: Path, server: FakeOllama
) -> None:
    turn = 0
    while not model.summaries:
        one_turn(env, workspace, note(turn), first=turn == 0)
        turn += 1
        assert turn < 12, "no compression happened"
    with store() as opened:
        [summary] = opened.list_sessions()
        sid = summary.session_id
    recorded = only_session().metadata.compression_count
    assert recorded >= 1

    # a process that records the next message and is killed while the model answers
    hold = threading.Event()
    server.script(Reply.text("never finished", hold=hold, hold_after=0))
    process = subprocess.Popen(
        [*OLLM, "run", "--continue", "-p", note(turn)],
        env=env,
        cwd=workspace,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while len(model.turn_requests()) < turn + 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(model.turn_requests()) == turn + 1
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    hold.set()
    turn += 1

    one_turn(env, workspace, note(turn), first=False)
    session = only_session()
    assert session.session_id == sid
    assert session.metadata.compression_count >= recorded
    last = model.turn_requests()[-1]
    assert summary_numbers(last), "the request after the crash lost the summary"
    assert request_tokens(last) <= WINDOW
    assert RULE in system_text(last)
    # every turn is in the file, the killed one's message too
    texts = [m.text for m in session.messages if m.role == "user"]
    assert texts[-2:] == [note(turn - 1), note(turn)]


@pytest.mark.slow
def test_a_process_killed_during_its_compression_leaves_the_next_one_to_compress(
    model: Model, env: dict[str, str], workspace: Path
) -> None:
    # the summaries are held: each process ends while its compression waits for one
    release = threading.Event()
    answer = model.reply

    def held(body: dict[str, Any]) -> Reply:
        reply = answer(body)
        if is_summary_request(body):
            reply.hold, reply.hold_after = release, 0
        return reply

    model.server.default_reply = held
    env["OLLM_SERVICES__COMPRESSION__FINISH_ON_EXIT_S"] = "60"
    turn = 0
    process: subprocess.Popen[bytes] | None = None
    while process is None:
        args = [*OLLM, "run", "-p", note(turn)] if turn == 0 else [*OLLM, "run", "-c", "-p"]
        if turn:
            args.append(note(turn))
        started = len([b for b in model.chat_requests() if is_summary_request(b)])
        candidate = subprocess.Popen(
            args, env=env, cwd=workspace, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120
        while candidate.poll() is None and time.monotonic() < deadline:
            if len([b for b in model.chat_requests() if is_summary_request(b)]) > started:
                process = candidate  # its compression is waiting for the summary
                break
            time.sleep(0.05)
        else:
            assert candidate.returncode == 0
        turn += 1
        assert turn < 12, "no compression started"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert only_session().metadata.compression_count == 0  # it died before recording

    model.server.default_reply = answer
    release.set()
    done = subprocess.run(
        [*OLLM, "run", "-c", "-p", note(turn)],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "cut at once" not in done.stderr  # nothing is cut silently, or at all
    session = only_session()
    assert session.metadata.compression_count >= 1
    last = model.turn_requests()[-1]
    assert summary_numbers(last)
    assert request_tokens(last) <= WINDOW
    assert [m.text for m in session.messages if m.role == "user"] == [
        note(t) for t in range(turn + 1)
    ]


@pytest.mark.ray
def test_after_the_recording_service_restarts_a_resume_starts_from_the_checkpoint(
    ray_instance: None, model: Model, server: FakeOllama, workspace: Path
) -> None:
    import asyncio

    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.errors import ActorFailedError
    from ollm_cli.pipeline.runtime import create_runtime

    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.tool_workers = 1
    settings.services.context.load_project_files = False
    settings.tools.default_approval = "deny"
    settings.tools.approval = dict.fromkeys(settings.tools.approval, "deny")

    async def scenario() -> tuple[str, dict[str, Any]]:
        runtime = create_runtime(settings, workspace, kind="ray")
        await runtime.start()
        try:
            first = Coordinator(runtime, settings, workspace=workspace)
            sid = await first.start_session(title="restart")
            turn = 0
            while True:
                await first.run_turn(sid, note(turn))
                turn += 1
                await first.finish_compression(sid)
                recorded = await runtime.recording.call(RecordingShell.get_session, sid)
                if recorded.metadata.compression_count:
                    break
                assert turn < 12, "no compression happened"
            first.conversations.clear()  # this client is gone with the service
            before = await runtime.recording.call(ShellBase.ping)
            await runtime.recording.kill()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the kill takes effect a moment later
                try:
                    if await runtime.recording.call(ShellBase.ping) != before:
                        break
                except ActorFailedError:
                    pass
                await asyncio.sleep(0.05)
            second = Coordinator(runtime, settings, workspace=workspace)
            await second.start_session(resume=sid)
            await second.run_turn(sid, note(turn))
            await second.end_session(sid)
            return sid, model.turn_requests()[-1]
        finally:
            await runtime.shutdown()

    sid, last = asyncio.run(scenario())
    assert summary_numbers(last), "the request after the restart lost the summary"
    assert request_tokens(last) <= WINDOW
    with store() as opened:
        session = opened.get_session(sid)
    assert session.metadata.compression_count >= 1
