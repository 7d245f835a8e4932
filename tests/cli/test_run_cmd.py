"""``ollm run``: one scripted turn, and the interactive chat driven through a
pseudo-terminal (every slash command, resume, Ctrl-C, approvals, /exit), against a
real Ollama-speaking server, on every runtime a user can choose: the local service
(the default; its own Ray head per test home, stopped after the test) and in-process.
"""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pexpect
import pytest

from ollm_cli.cli.chat_repl import ChatRepl
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.cli.output import console, err_console
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import ToolCallPart
from ollm_cli.pipeline.runtime import create_runtime
from tests.cli.conftest import ollm_env, shared_for
from tests.fake_ollama import FakeModel, FakeOllama, Reply

MODEL = "llama3.2:latest"
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


RUNTIMES = ["service", "inprocess"]


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def env(
    request: pytest.FixtureRequest,
    server: FakeOllama,
    ollm_home: Path,
    runtime: str,
    tmp_path: Path,
) -> Iterator[dict[str, str]]:
    shared = shared_for(request, runtime)
    with ollm_env(runtime, server.url, ollm_home, tmp_path, shared=shared, COLUMNS="120") as values:
        yield values


def sessions(ollm_home: Path) -> ChatRecordingService:
    settings = OllmSettings()
    return ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )


def test_prompt_prints_the_answer_and_records_it(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    server.script(Reply.text("Paris is the capital of France."))
    done = subprocess.run(
        [*OLLM, "run", "-p", "Capital of France?"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Paris is the capital of France."
    store = sessions(ollm_home)
    [summary] = store.list_sessions()
    session = store.get_session(summary.session_id)
    assert [m.text for m in session.messages] == [
        "Capital of France?",
        "Paris is the capital of France.",
    ]
    store.close()


def test_prompt_stopped_by_a_loop_exits_5_with_json(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    server.script(*[Reply.tool_call("read_file", {"path": "x.txt"}) for _ in range(8)])
    env["OLLM_SERVICES__LOOP_DETECTION__ON_DETECT"] = "stop"
    done = subprocess.run(
        [*OLLM, "run", "-p", "loop please", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5, done.stderr
    result = orjson.loads(done.stdout)
    assert result["stopped"] == "loop" and result["loop"]["kind"] == "repeated-tool"
    assert "repeated-tool" in done.stderr


def test_no_loop_detection_flag_lets_the_calls_run(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    server.script(
        *[Reply.tool_call("read_file", {"path": "x.txt"}) for _ in range(4)],
        Reply.text("gave up"),
    )
    env["OLLM_SERVICES__LOOP_DETECTION__ON_DETECT"] = "stop"
    done = subprocess.run(
        [*OLLM, "run", "-p", "loop please", "--no-loop-detection"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gave up"


def test_continue_without_sessions_is_a_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [*OLLM, "run", "--continue", "-p", "hi"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 4
    assert "no session to continue" in done.stderr


def spawn(
    env: dict[str, str], cwd: Path, *args: str, sigint_ignored: bool = False
) -> pexpect.spawn:
    """The chat in a terminal; ``sigint_ignored``: started as a background job of a
    script is (SIGINT ignored, inherited through exec)."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    child = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run", *args],
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        timeout=60,
        preexec_fn=ignore_sigint if sigint_ignored else None,
    )
    child.expect("› ")
    return child


def test_interactive_chat_cancel_resume_and_exit(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    release = threading.Event()
    answers = {"hello": "first answer", "and now?": "third answer"}

    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        if last == "take your time":
            return Reply.text("a very slow answer that never finishes", hold=release, hold_after=2)
        if last.startswith("Write a title"):
            return Reply.text("Greetings")
        return Reply.text(answers.get(last, "ok"))

    server.default_reply = reply
    child = spawn(env, tmp_path)
    child.sendline("hello")
    child.expect("first answer")
    child.expect("› ")
    child.sendline("take your time")
    child.expect("very")  # the first chunks arrived; the rest is held by the server
    child.sendintr()
    child.expect("interrupted")
    child.expect("› ")
    release.set()
    child.sendline("/title Trip planning")
    child.expect("title set")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    store = sessions(ollm_home)
    [summary] = store.list_sessions()
    session = store.get_session(summary.session_id)
    users = [m.text for m in session.messages if m.role == "user"]
    assert users == ["hello", "take your time"]
    assert session.metadata.title == "Trip planning"
    store.close()

    # resume it and leave without a word: nothing changes
    before = (ollm_home / "sessions" / f"{summary.session_id}.json").read_bytes()
    child = spawn(env, tmp_path, "--resume", summary.session_id[:8])
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    store = sessions(ollm_home)
    again = store.get_session(summary.session_id)
    assert [m.text for m in again.messages] == [m.text for m in session.messages]
    assert again.metadata.title == "Trip planning"
    store.close()
    assert before  # the file existed before the resume

    # --continue picks it and the next answer goes on from the whole history
    child = spawn(env, tmp_path, "--continue")
    child.sendline("and now?")
    child.expect("third answer")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    last = server.chat_requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"][:2] == ["hello", "take your time"]


def test_ctrl_c_cancels_the_answer_of_a_chat_started_with_sigint_ignored(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """A chat started where SIGINT is ignored (a background job of a script, a test
    runner started with ``&``) inherits that: before, Ctrl-C showed "^C" and nothing
    else until the held answer ended (the "Ctrl-C does not cancel on a shared service"
    report: its runs had SIGINT ignored, whatever the service had served)."""
    release = threading.Event()

    def reply(body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["content"] == "take your time":
            return Reply.text("a very slow answer that never finishes", hold=release, hold_after=2)
        if body["messages"][-1]["content"] == "and now?":
            return Reply.text("the next answer")
        return Reply.text("ok")

    server.default_reply = reply
    child = spawn(env, tmp_path, sigint_ignored=True)
    try:
        child.sendline("take your time")
        child.expect("very")  # the first chunks arrived; the rest is held by the server
        child.sendintr()
        child.expect("interrupted")
        child.expect("› ")
        # the held turn was cancelled where it ran, not left running: the next one runs
        child.sendline("and now?")
        child.expect("the next answer")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        release.set()
        child.close()
    assert child.exitstatus == 0


def test_slash_commands_in_process(server: FakeOllama, tmp_path: Path) -> None:
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = MODEL
    settings.provider.ollama.host = server.url
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    lines = iter(
        [
            "/help",
            "/context add style Use short sentences.",
            "/context list",
            "/context",
            "what now?",
            "/context remove style",
            "/context bogus",
            "/sessions",
            "/history",
            "/snapshot",
            "/compress keep the decisions",
            "/title",
            "/unknown",
            '/context add "unbalanced',
            "/exit",
        ]
    )
    outputs: list[str] = []
    loop = LoopThread()
    runtime = create_runtime(settings, tmp_path, kind="inprocess")
    repl = ChatRepl(loop, console, err_console, read_line=lambda prompt: next(lines))
    coordinator = Coordinator(runtime, settings, workspace=tmp_path, ask=repl.ask_approval)
    repl.coordinator = coordinator
    coordinator.events.subscribe(repl.render_event)
    try:
        loop.run(runtime.start())
        sid = loop.run(coordinator.start_session())
        with console.capture() as captured, err_console.capture() as errors:
            repl.chat(sid)
        outputs.append(captured.get())
        outputs.append(errors.get())
        for sid in list(coordinator.conversations):
            loop.run(coordinator.end_session(sid))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    text = "\n".join(outputs)
    assert "/context add KEY TEXT" in text  # /help
    assert "added style" in text and "Use short sentences." in text
    assert "removed style" in text and "usage: /context" in text
    assert "snapshot" in text and "saved" in text
    assert "unknown or incomplete command" in text and "cannot parse" in text
    request = next(r for r in server.chat_requests if r["messages"][-1]["content"] == "what now?")
    assert "Use short sentences." in request["messages"][0]["content"]


def test_approval_prompt_answers(tmp_path: Path) -> None:
    import asyncio

    answers = iter(["y", "no"])
    repl = ChatRepl(LoopThread(), console, err_console, read_line=lambda prompt: next(answers))
    call = ToolCallPart(id="c1", name="shell", args={"command": "ls"})
    try:
        assert asyncio.run(repl.ask_approval(call)) is True
        assert asyncio.run(repl.ask_approval(call)) is False
    finally:
        repl.loop.close()


def test_a_session_id_without_resume_is_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [*OLLM, "run", "3f1c2a9e", "-p", "hi"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "ollm run --resume ID" in done.stderr


def test_every_slash_command_in_a_terminal(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    """Each slash command as a user types it, on each runtime: ``/resume ID`` mid-chat
    crashed on the service (the client had no ``compression_pending``)."""

    def reply(body: dict[str, Any]) -> Reply:
        last = str(body["messages"][-1]["content"])
        if last.startswith("Write a title"):
            return Reply.text("A title")
        if last.startswith("You compress the earlier part"):
            return Reply.text("## Goal\nslash commands\n## Facts\nnone")
        return Reply.text(f"echo: {last[:30]}")

    server.default_reply = reply
    first = subprocess.run(
        [*OLLM, "run", "-p", "the first session"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert first.returncode == 0, first.stderr
    store = sessions(ollm_home)
    [other] = store.list_sessions()
    store.close()

    child = spawn(env, tmp_path)
    try:
        steps = [
            ("/help", "/context add KEY TEXT"),
            ("/context add style Use short sentences.", "added style"),
            ("/context list", "Use short sentences."),
            ("what now?", "echo: what now?"),
            ("/context remove style", "removed style"),
            ("/context bogus", "usage: /context"),
            ("/sessions", other.session_id[:8]),
            ("/history", "what now?"),
            ("/snapshot", "saved"),
            ("/compress keep the decisions", "compress"),
            ("/title Slash tour", "title set"),
            ("/thinking on", "reasoning shown"),
            ("/unknown", "unknown or incomplete command"),
            ('/context add "unbalanced', "cannot parse"),
            (f"/resume {other.session_id[:8]}", f"resumed {other.session_id[:8]}"),
            ("/history", "the first session"),
            ("and again", "echo: and again"),
        ]
        for line, shown in steps:
            child.sendline(line)
            child.expect_exact(shown)
            child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "Traceback" not in (child.before or "")
    request = next(r for r in server.chat_requests if r["messages"][-1]["content"] == "what now?")
    assert "Use short sentences." in request["messages"][0]["content"]
    store = sessions(ollm_home)
    resumed = store.get_session(other.session_id)
    assert [m.text for m in resumed.messages if m.role == "user"] == [
        "the first session",
        "and again",
    ]
    titled = [s for s in store.list_sessions() if s.title == "Slash tour"]
    assert len(titled) == 1 and titled[0].session_id != other.session_id
    store.close()


def test_approval_is_asked_in_the_terminal(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """A tool that needs approval asks the user's terminal, on each runtime; yes runs
    it in the workspace, no does not."""

    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if str(last.get("content", "")).startswith("Write a title"):
            return Reply.text("Files")
        if last["role"] == "tool":
            return Reply.text("wrote it" if "yes" in str(body["messages"][-3]) else "did not")
        name = str(last["content"]).split()[-1]
        return Reply.tool_call("write_file", {"path": name, "content": "written"})

    server.default_reply = reply
    child = spawn(env, tmp_path)
    try:
        child.sendline("write yes.txt")
        child.expect_exact("allow write_file(")
        child.sendline("y")
        child.expect_exact("wrote it")
        child.expect("› ")
        child.sendline("write no.txt")
        child.expect_exact("allow write_file(")
        child.sendline("n")
        child.expect_exact("did not")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert (tmp_path / "yes.txt").read_text() == "written"
    assert not (tmp_path / "no.txt").exists()


def test_model_given_with_continue_is_the_model_of_the_next_turn(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """``--model`` with ``--continue`` was ignored without a word: the resumed
    session's own model answered."""
    server.models.append(FakeModel(name="qwen3:8b", family="qwen3"))
    server.script(Reply.text("one"), Reply.text("two"))
    for args in (["-p", "first"], ["--continue", "--model", "qwen3:8b", "-p", "second"]):
        done = subprocess.run(
            [*OLLM, "run", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
    asked = [
        r["model"]
        for r in server.chat_requests
        if not str(r["messages"][-1]["content"]).startswith("Write a title")
    ]
    assert asked[0] == MODEL and asked[-1] == "qwen3:8b"


def _ollm_run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OLLM, "run", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )


def test_a_failed_start_leaves_no_empty_session_and_no_lock(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    """An unknown model left an empty session behind, and on the service that session
    stayed locked ("being written by process ... (ray::PipelineHo)") until the
    service stopped."""
    failed = _ollm_run(env, tmp_path, "-p", "hello", "--model", "nosuch:1b")
    assert failed.returncode == 6, failed.stderr
    assert "nosuch:1b" in failed.stderr
    store = sessions(ollm_home)
    assert store.list_sessions() == []
    store.close()
    first = _ollm_run(env, tmp_path, "-p", "hello")
    assert first.returncode == 0, first.stderr
    failed = _ollm_run(env, tmp_path, "--continue", "--model", "nosuch:1b", "-p", "again")
    assert failed.returncode == 6, failed.stderr
    again = _ollm_run(env, tmp_path, "--continue", "-p", "and again")
    assert again.returncode == 0, again.stderr
    assert "being written" not in again.stderr
    store = sessions(ollm_home)
    [only] = store.list_sessions()
    users = [m.text for m in store.get_session(only.session_id).messages if m.role == "user"]
    assert users == ["hello", "and again"]
    store.close()


def test_retention_says_what_it_moved_to_the_trash(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """The "moved N sessions to the trash" line reached only the service's log."""
    env["OLLM_SERVICES__SESSION__MAX_SESSIONS"] = "1"
    first = _ollm_run(env, tmp_path, "-p", "one")
    assert first.returncode == 0, first.stderr
    second = _ollm_run(env, tmp_path, "-p", "two")
    assert second.returncode == 0, second.stderr
    assert "to the trash" in second.stderr


LONG = " ".join(f"fact{i} is recorded in the answer" for i in range(80))


def test_the_chat_shows_an_automatic_compaction(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """The README says the chat shows when a compression starts and finishes; on the
    service it never did (its events were not delivered between turns)."""

    def reply(body: dict[str, Any]) -> Reply:
        last = str(body["messages"][-1].get("content", ""))
        if last.startswith("Write a title"):
            return Reply.text("Compaction")
        if last.startswith("You compress the earlier part"):
            return Reply.text("## Goal\ncompaction\n## Facts\nnone")
        prompt = len(orjson.dumps(body)) // 4
        return Reply.text(LONG, chunks=4, prompt_eval_count=prompt)

    server.models[0].context_length = 4096
    server.default_reply = reply
    env.update(
        {
            "OLLM_SERVICES__COMPRESSION__THRESHOLD": "0.2",
            "OLLM_SERVICES__COMPRESSION__STRATEGY": "summarize",
            "OLLM_SERVICES__COMPRESSION__PRESERVE_RECENT": "0",
            "OLLM_SERVICES__COMPRESSION__RESPONSE_RESERVE": "0",
        }
    )
    child = spawn(env, tmp_path)
    seen = io.StringIO()
    child.logfile_read = seen
    try:
        for text in ("first long one", "second long one", "third long one"):
            child.sendline(text)
            child.expect_exact("fact79")
            child.expect("› ")
        child.sendline("/compress keep the facts")
        child.expect_exact("compressing with the focus: keep the facts")
        child.expect(r"compressed \(|compression fell back|nothing to compress")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    shown = seen.getvalue()
    assert child.exitstatus == 0, shown
    assert "Traceback" not in shown
    assert "in the background" in shown  # the automatic compaction, as it started
