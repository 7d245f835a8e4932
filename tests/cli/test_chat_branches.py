"""The chat's ``/rewind`` and ``/fork``, driven line by line against a real pipeline
(in-process, a fake Ollama server, real tools on real files)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from ollm_cli.cli.chat_repl import ChatRepl
from ollm_cli.cli.loop_thread import LoopThread
from ollm_cli.cli.output import console, err_console
from ollm_cli.config.settings import OllmSettings
from ollm_cli.pipeline.coordinator import Coordinator
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session
from ollm_cli.pipeline.runtime import create_runtime
from tests.cli.conftest import ollm_env, shared_for
from tests.fake_ollama import FakeOllama, Reply


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def test_rewind_restores_files_continues_in_a_fork_and_resends_the_edited_prompt(
    server: FakeOllama, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    notes = workspace / "notes.txt"
    notes.write_text("v1\n")
    server.script(
        Reply.tool_call("write_file", {"path": "notes.txt", "content": "v2\n"}),
        Reply.text("Wrote v2."),
        Reply.tool_call("shell", {"command": "echo v3 >> notes.txt"}),
        Reply.text("Appended v3."),
        Reply.text("Fine, v4 then."),
        Reply.text("Still here."),
    )
    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = "llama3.2:latest"
    settings.provider.ollama.host = server.url
    settings.runtime.kind = "inprocess"
    settings.services.context.load_project_files = False
    settings.tools.approval = {"write_file": "allow", "shell": "allow"}
    lines = iter(
        [
            "write v2",
            "append v3",
            "/fork x",
            "/rewind",
            "",  # cancelled
            "/rewind",
            "1",
            "9",  # no such mode: cancelled
            "/rewind",
            "2",  # back to just before "append v3"
            "1",  # conversation and files
            "append v4 instead",  # the prompt, edited
            "/fork 4",
            "still there?",
            "/exit",
        ]
    )
    loop = LoopThread()
    runtime = create_runtime(settings, workspace, kind="inprocess")
    repl = ChatRepl(loop, console, err_console, read_line=lambda prompt: next(lines))
    coordinator = Coordinator(runtime, settings, workspace=workspace, ask=repl.ask_approval)
    repl.coordinator = coordinator
    coordinator.events.subscribe(repl.render_event)
    sessions: dict[str, Session] = {}
    try:
        loop.run(runtime.start())
        first = loop.run(coordinator.start_session(title="t"))
        with console.capture() as captured, err_console.capture() as errors:
            repl.chat(first)
        assert notes.read_text() == "v2\n"  # v3 undone
        for sid in list(coordinator.conversations):
            loop.run(coordinator.end_session(sid))
        for summary in loop.run(coordinator.recent_sessions(10)):
            sid = summary.session_id
            sessions[sid] = loop.run(coordinator.get_session(sid))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    text = captured.get() + errors.get()
    assert "append v3" in text and "conversation and files" in text
    assert "usage: /fork [N]" in text and text.count("rewind cancelled") == 2
    assert "restored notes.txt" in text
    assert len(sessions) == 3  # the original, the rewound fork, the /fork of it
    original = sessions[first]
    assert [m.text for m in original.messages if m.role == "user"] == ["write v2", "append v3"]
    rewound = next(
        s
        for s in sessions.values()
        if (s.metadata.model_extra or {}).get("forkedFrom", {}).get("sessionId") == first
    )
    users = [m.text for m in rewound.messages if m.role == "user"]
    assert users == ["write v2", "append v4 instead"]
    last = next(s for s in sessions.values() if s.session_id not in (first, rewound.session_id))
    assert (last.metadata.model_extra or {})["forkedFrom"] == {
        "sessionId": rewound.session_id,
        "messageIndex": 4,
    }
    assert [m.text for m in last.messages if m.role == "user"] == ["write v2", "still there?"]


OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


@pytest.fixture(params=["service", "inprocess"])
def pty_env(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    runtime = str(request.param)
    shared = shared_for(request, runtime)
    with ollm_env(runtime, server.url, ollm_home, tmp_path, shared=shared, COLUMNS="120") as values:
        yield values


def test_the_chat_and_the_view_mark_the_turns_that_changed_files(
    server: FakeOllama, pty_env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    """After a turn whose shell call changed files the chat shows a dim ``changed:``
    line, a turn that changed nothing shows none, and ``ollm sessions view`` shows the
    same line under the tool call, on each runtime."""
    project = tmp_path / "project"
    project.mkdir()
    command = "echo a > a.txt && mkdir -p d && echo b > d/b.txt && echo c > c.txt && echo e > e.txt"

    def reply(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if str(last.get("content", "")).startswith("Write a title"):
            return Reply.text("Files")
        if last["role"] == "tool":
            return Reply.text("made them")
        if last["content"] == "make files":
            return Reply.tool_call("shell", {"command": command})
        return Reply.text("nothing to do")

    server.default_reply = reply
    note = "changed: a.txt, c.txt, d/b.txt (+1 more)"
    child = pexpect.spawn(
        OLLM[0], [*OLLM[1:], "run"], env=pty_env, cwd=str(project), encoding="utf-8", timeout=60
    )
    try:
        child.expect("› ")
        child.sendline("make files")
        child.expect_exact("allow shell(")
        child.sendline("y")
        child.expect_exact("made them")
        child.expect_exact(note)
        child.expect("› ")
        child.sendline("just talk")
        child.expect_exact("nothing to do")
        child.expect("› ")
        quiet = child.before or ""
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert "changed:" not in quiet
    assert (project / "d" / "b.txt").read_text() == "b\n"
    settings = OllmSettings()
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    [summary] = store.list_sessions()
    store.close()
    shown = subprocess.run(
        [*OLLM, "sessions", "view", summary.session_id],
        env=pty_env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    after_call = shown.stdout[shown.stdout.index("tool shell") :]
    assert note in after_call
    assert shown.stdout.count("changed:") == 1
