"""``ollm run -p`` for scripts and terminals: stdin as the message, refusals before
anything starts, the answer streamed on a terminal, tools allowed by flag, and a
first request that fails leaving nothing behind; on every runtime a user can choose
(the local service and in-process), against a real Ollama-speaking server.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pexpect
import pytest

from ollm_cli.cli.one_shot import ApproveMode, DeniedCalls, prompt_text, tool_grant
from ollm_cli.config.settings import OllmSettings, ToolSettings
from ollm_cli.pipeline.errors import UsageError
from ollm_cli.pipeline.events import ToolCallEvent
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.tools import ApprovalPolicy, ToolGrant
from tests.cli.conftest import ollm_env, shared_for
from tests.fake_ollama import FakeOllama, Reply

OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]
CONSOLE_SCRIPT = "from ollm_cli.cli.entry import main\nmain()\n"
"""What the ``ollm`` script runs (``OLLM`` imports typer's app before it)."""


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


@pytest.fixture(params=["service", "inprocess"])
def env(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The variables of ``ollm`` on each runtime a user can choose; the local service
    (its own Ray head in this test's home) is stopped after the test."""
    runtime = str(request.param)
    shared = shared_for(request, runtime)
    with ollm_env(runtime, server.url, ollm_home, tmp_path, shared=shared, COLUMNS="120") as values:
        yield values


def _run(
    env: dict[str, str], cwd: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``ollm run ARGS`` as a real process; ``stdin`` piped in (else ``/dev/null``)."""
    return subprocess.run(
        [*OLLM, "run", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        timeout=180,
    )


def _user_messages(ollm_home: Path) -> list[list[str]]:
    settings = OllmSettings()
    store = ChatRecordingService(
        settings.services.session, snapshots_dir=settings.snapshots.data_dir
    )
    try:
        return [
            [m.text for m in store.get_session(s.session_id).messages if m.role == "user"]
            for s in store.list_sessions()
        ]
    finally:
        store.close()


# ------------------------------------------------------------------ the message


def _pipe(data: bytes) -> io.TextIOWrapper:
    """A real pipe holding ``data``, its writing end closed (what a shell's ``|`` gives)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return open(read, encoding="utf-8")


def test_prompt_text_reads_stdin_for_dash_and_appends_a_pipe_to_text() -> None:
    with _pipe("naïve ☕\nline two\n".encode()) as piped:
        assert prompt_text("-", piped) == "naïve ☕\nline two\n"
    with _pipe(b"the diff\n") as piped:
        assert prompt_text("Review this:", piped) == "Review this:\n\nthe diff\n"
    with _pipe(b"  \n") as piped:  # nothing piped: the text alone
        assert prompt_text("Hello", piped) == "Hello"
    with open(os.devnull, encoding="utf-8") as null:  # /dev/null is not read as a pipe
        assert prompt_text("Hello", null) == "Hello"
    assert prompt_text("Hello", None) == "Hello"
    # a stream with no file behind it (an embedding program's): read as piped
    assert prompt_text("Hello", io.StringIO("world")) == "Hello\n\nworld"
    assert prompt_text("-", io.StringIO("all of it\n")) == "all of it\n"
    with pytest.raises(UsageError):
        prompt_text("-", None)  # no stdin at all: nothing to send


@pytest.mark.parametrize(
    ("option", "data", "says"),
    [
        (None, b"hello\n", "-p -"),
        ("", b"", "empty"),
        ("   ", b"", "empty"),
        ("-", b"", "empty"),
        ("-", b" \n\t\n", "empty"),
        ("-", b"caf\xe9 au lait", "0xe9 at offset 3"),
        ("Summarize:", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_prompt_text_refuses_a_piped_chat_an_empty_message_and_non_utf8(
    option: str | None, data: bytes, says: str
) -> None:
    with _pipe(data) as piped, pytest.raises(UsageError) as refused:
        prompt_text(option, piped)
    assert says in refused.value.message + (refused.value.hint or "")
    assert refused.value.exit_code == 2


def test_prompt_text_leaves_the_chat_to_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert prompt_text(None, Terminal("")) is None


# ------------------------------------------------------------------ the tools


def test_tool_grant_names_the_known_tools_and_keeps_a_config_deny(tmp_path: Path) -> None:
    settings = OllmSettings()
    assert tool_grant(None, None, settings, tmp_path) is None
    assert tool_grant(None, ApproveMode.deny, settings, tmp_path) is None
    assert tool_grant(None, ApproveMode.auto, settings, tmp_path) == ToolGrant(every_tool=True)
    grant = tool_grant(" shell, write_file ", None, settings, tmp_path)
    assert grant == ToolGrant(tools=frozenset({"shell", "write_file"}))
    with pytest.raises(UsageError) as unknown:
        tool_grant("shell,shel", None, settings, tmp_path)
    assert "'shel'" in unknown.value.message
    assert "edit_file" in (unknown.value.hint or "") and "shell" in (unknown.value.hint or "")
    with pytest.raises(UsageError):
        tool_grant(" , ", None, settings, tmp_path)
    settings.tools.approval["shell"] = "deny"
    with pytest.raises(UsageError) as denied:
        tool_grant("shell", None, settings, tmp_path)
    assert "tools.approval.shell: deny" in denied.value.message


def test_a_grant_turns_ask_into_allow_but_never_a_deny() -> None:
    tools = ToolSettings()
    tools.approval["shell"] = "deny"
    policy = ApprovalPolicy(tools, interactive=False)
    named = ToolGrant(tools=frozenset({"write_file", "shell"}))
    assert policy.decide("write_file") == "ask"
    assert policy.decide("write_file", named) == "allow"
    assert policy.decide("edit_file", named) == "ask"
    assert policy.decide("edit_file", ToolGrant(every_tool=True)) == "allow"
    assert policy.decide("shell", named) == "deny"
    assert policy.decide("shell", ToolGrant(every_tool=True)) == "deny"
    assert policy.decide("read_file") == "allow"


def test_a_denied_call_is_said_once_with_the_flag_that_allows_it() -> None:
    said = DeniedCalls(None)
    for denied in ("ask", "ask"):
        said(ToolCallEvent(session_id="s", name="shell", args={}, denied=denied))
    said(ToolCallEvent(session_id="s", name="read_file", args={}, success=True))
    said(ToolCallEvent(session_id="s", name="grep", args={}, denied="deny"))
    assert len(said.lines) == 2
    assert "--allow-tools shell" in said.lines[0] and "-p asks nobody" in said.lines[0]
    assert "tools.approval.grep: deny" in said.lines[1]
    by_flag = DeniedCalls(ApproveMode.deny)
    by_flag(ToolCallEvent(session_id="s", name="shell", args={}, denied="ask"))
    assert "(--approve deny)" in by_flag.lines[0]


# ------------------------------------------------------------- through the command


def _megabyte() -> str:
    lines = [f'line {i}: café ☕ naïve "quoted" \\ tab\there\n' for i in range(30_000)]
    text = "".join(lines)
    assert len(text.encode()) > 1_000_000
    return text


@pytest.fixture
def big_window(server: FakeOllama, env: dict[str, str]) -> Iterator[None]:
    server.models[0].context_length = 4_000_000
    env["OLLM_PROVIDER__OLLAMA__MAX_CONTEXT_WINDOW"] = "4000000"
    yield


def test_stdin_is_the_message_byte_for_byte_and_stdout_only_the_answer(
    server: FakeOllama,
    env: dict[str, str],
    ollm_home: Path,
    tmp_path: Path,
    big_window: None,
) -> None:
    """``echo hi | ollm run -p -`` answered "echo: -"; ``cat f | ollm run -p TEXT``
    ignored the pipe; a 1 MB message could not be given at all."""
    server.default_reply = lambda body: Reply.text("Got it.")
    big = _megabyte()
    whole = _run(env, tmp_path, "-p", "-", stdin=big.encode())
    assert whole.returncode == 0, whole.stderr.decode()
    assert whole.stdout == b"Got it.\n"  # stdout is not a terminal: only the answer
    assert b"session " in whole.stderr
    assert server.chat_requests[0]["messages"][-1]["content"] == big
    both = _run(env, tmp_path, "-p", "Summarize this:", stdin=b"line one\nline two\n")
    assert both.returncode == 0, both.stderr.decode()
    assert both.stdout == b"Got it.\n"
    recorded = sorted(_user_messages(ollm_home), key=len)
    assert sorted(m for ms in recorded for m in ms) == sorted(
        [big, "Summarize this:\n\nline one\nline two\n"]
    )


@pytest.mark.own_service  # asserts that no service started for its home
def test_a_piped_chat_and_empty_messages_are_refused_before_anything_starts(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    """``cat file | ollm run`` made every line a turn; ``-p ""`` was sent and recorded."""
    cases: list[tuple[tuple[str, ...], bytes | None, str]] = [
        ((), b"first line\nsecond line\n", "ollm run -p -"),
        (("-p", ""), None, "the message is empty"),
        (("-p", "   "), None, "the message is empty"),
        (("-p", "-"), b"", "stdin had nothing to send"),
        (("-p", "-"), b"caf\xe9\n", "stdin is not UTF-8"),
    ]
    for args, stdin, says in cases:
        refused = _run(env, tmp_path, *args, stdin=stdin)
        assert refused.returncode == 2, (args, refused.stderr)
        assert says in refused.stderr.decode(), (args, refused.stderr)
        assert refused.stdout == b""
        assert b"starting" not in refused.stderr
    assert server.requests == []  # the provider was never asked
    assert not (ollm_home / "service").exists()  # no service started
    assert _user_messages(ollm_home) == []


def test_the_answer_streams_on_a_terminal(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """``-p`` on a terminal was blank until the whole answer came."""
    release = threading.Event()

    def reply(body: dict[str, Any]) -> Reply:
        if str(body["messages"][-1]["content"]).startswith("Write a title"):
            return Reply.text("Streaming")
        return Reply.text("alpha beta gamma omega", hold=release, hold_after=2)

    server.default_reply = reply
    child = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run", "-p", "stream please"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
    )
    try:
        child.expect_exact("alpha beta")
        shown = str(child.before) + str(child.after) + str(child.buffer)
        assert "omega" not in shown  # the server still holds it: this part was streamed
        release.set()
        child.expect_exact(" gamma omega")
        child.expect(pexpect.EOF)
    finally:
        release.set()
        child.close()
    assert child.exitstatus == 0, child.before


def _write_files(body: dict[str, Any]) -> Reply:
    """Each message ``write NAME`` asks for ``write_file`` NAME; a tool result is answered."""
    last = body["messages"][-1]
    if str(last.get("content", "")).startswith("Write a title"):
        return Reply.text("Files")
    if last["role"] == "tool":
        return Reply.text("after the tool: " + str(last["content"])[:60])
    name = str(last["content"]).split()[-1]
    return Reply.tool_call("write_file", {"path": name, "content": "written"})


def test_tools_in_scripts_are_allowed_by_flag_and_a_denial_is_said(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """A tool call in ``-p`` was denied with no word of it and no way to allow it."""
    server.default_reply = _write_files
    work = tmp_path / "work"
    work.mkdir()
    denied = _run(env, work, "-p", "write a.txt")
    assert denied.returncode == 0, denied.stderr.decode()
    assert not (work / "a.txt").exists()
    notes = [line for line in denied.stderr.decode().splitlines() if "was not run" in line]
    assert len(notes) == 1, denied.stderr
    assert "write_file" in notes[0] and "--allow-tools write_file" in notes[0]
    assert b"after the tool: Error: not run" in denied.stdout  # what the model was told

    named = _run(env, work, "-p", "write b.txt", "--allow-tools", "write_file,shell")
    assert named.returncode == 0, named.stderr.decode()
    assert (work / "b.txt").read_text() == "written"
    assert b"was not run" not in named.stderr

    auto = _run(env, work, "-p", "write c.txt", "--approve", "auto")
    assert auto.returncode == 0, auto.stderr.decode()
    assert (work / "c.txt").read_text() == "written"

    refused = _run(env, work, "-p", "write d.txt", "--approve", "deny", "--json")
    assert refused.returncode == 0, refused.stderr.decode()
    assert not (work / "d.txt").exists()
    result = orjson.loads(refused.stdout)
    assert any("(--approve deny)" in n for n in result["notices"]), result

    unknown = _run(env, work, "-p", "write e.txt", "--allow-tools", "write_files")
    assert unknown.returncode == 2
    said = unknown.stderr.decode()
    assert "'write_files'" in said and "write_file" in said.split("'write_files'")[1]
    assert not (work / "e.txt").exists()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_failed_first_request_leaves_no_session_and_no_lock(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    """A first request the provider refused (404: the model went away between
    /api/show and /api/chat) left a session holding only the prompt, listed and
    continued as if it were a conversation."""
    server.script(Reply.http_error(404, f"model '{env['OLLM_MODEL']}' not found"))
    failed = _run(env, tmp_path, "-p", "hello")
    assert failed.returncode == 6, failed.stderr.decode()
    assert _user_messages(ollm_home) == []
    nothing = _run(env, tmp_path, "--continue", "-p", "again")
    assert nothing.returncode == 4 and b"no session to continue" in nothing.stderr

    first = _run(env, tmp_path, "-p", "kept")
    assert first.returncode == 0, first.stderr.decode()
    server.script(Reply.http_error(500, "out of memory"))
    failed = _run(env, tmp_path, "-p", "lost")
    assert failed.returncode == 6, failed.stderr.decode()
    down = dict(env, OLLM_OLLAMA_HOST=f"http://127.0.0.1:{_closed_port()}")
    failed = _run(down, tmp_path, "-p", "nobody there")
    assert failed.returncode == 6, failed.stderr.decode()
    again = _run(env, tmp_path, "--continue", "-p", "and again")
    assert again.returncode == 0, again.stderr.decode()
    assert b"being written" not in again.stderr
    assert _user_messages(ollm_home) == [["kept", "and again"]]


def test_the_chat_takes_the_same_flags(
    server: FakeOllama, env: dict[str, str], tmp_path: Path
) -> None:
    """``--allow-tools`` runs the named tool in the chat without asking; ``--approve
    deny`` asks nothing and runs nothing."""
    server.default_reply = _write_files
    for args, name, runs in (
        (("--allow-tools", "write_file"), "allowed.txt", True),
        (("--approve", "deny"), "refused.txt", False),
    ):
        child = pexpect.spawn(
            OLLM[0],
            [*OLLM[1:], "run", *args],
            env=env,
            cwd=str(tmp_path),
            encoding="utf-8",
            timeout=120,
        )
        try:
            child.expect("› ")
            child.sendline(f"write {name}")
            index = child.expect_exact(["allow write_file(", "after the tool:"])
            assert index == 1, "the chat asked for a tool its flags decide"
            child.expect("› ")
            child.sendline("/exit")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0, child.before
        assert (tmp_path / name).exists() is runs


# ------------------------------------------------------------- the thin client

NOT_IN_THE_CLIENT = (
    "ray",
    "sqlite3",
    "ijson",
    "tiktoken",
    "psutil",
    "ollm_cli.actors",
    "ollm_cli.pipeline.runtime",
    "ollm_cli.pipeline.coordinator._coordinator",
    "ollm_cli.pipeline.coordinator._conversation",
    "ollm_cli.pipeline.compression._service",
    "ollm_cli.pipeline.compression._tokens",
    "ollm_cli.pipeline.compression._secret_cuts",
    "ollm_cli.pipeline.compression._snapshots",
    "ollm_cli.pipeline.compression._summarizer",
    "ollm_cli.pipeline.loop_detection._service",
    "ollm_cli.pipeline.context._manager",
    "ollm_cli.base.redaction",
    "typer",
    "click",
    "rich",  # in a pipe: its one stderr line is written as rich would write it there
    "ollm_cli.cli.chat_repl",
)
"""What a warm ``ollm run -p`` on the service must not import: Ray, the session store's
sqlite index and streaming reader, the token counter, the services and the runtime
(all of them the service's), and psutil; nor typer and click (the console script
reads ``run -p``'s options without them, ``cli/run_lean.py``). Nor any module of
``pipeline.recording``: the package itself only names its exports, and the records
the store answers with are in ``pipeline.records``."""


def _not_for_the_client(module: str) -> bool:
    return module.startswith("ollm_cli.pipeline.recording.") or any(
        module == name or module.startswith(name + ".") for name in NOT_IN_THE_CLIENT
    )


def test_a_warm_run_p_imports_none_of_the_services_it_is_a_client_of(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> None:
    """A warm ``ollm run -p`` took 2.7x ``ollm --help``: to name the types of the
    contract and the protocol, its process imported the session store (sqlite3,
    ijson), tiktoken, the loop detector and the context manager. ``python -X
    importtime`` lists every module the command imports (the packages' lazy
    exports included). The service is the one the tests share: what is measured is
    the warm client, not a start."""
    shared = shared_for(request, "service")
    with ollm_env("service", server.url, ollm_home, tmp_path, shared=shared) as values:
        first = _run(values, tmp_path, "-p", "hello")  # the host of this home, made warm
        assert first.returncode == 0, first.stderr.decode()
        # not measured by coverage: its data file is a sqlite3 database, one of the
        # modules the client must not import
        unmeasured = {k: v for k, v in values.items() if not k.startswith("COVERAGE_")}
        warm = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, "run", "-p", "hello again"],
            env=unmeasured,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=180,
        )
        assert warm.returncode == 0, warm.stderr.decode()
    assert warm.stdout == b"You said: hello again\n"
    imported = [
        line.rsplit("|", 1)[-1].strip()
        for line in warm.stderr.decode().splitlines()
        if line.startswith("import time:")
    ]
    # the list is the whole command's: the client, its messages, what the turn returned
    assert {
        "ollm_cli.pipeline.service._client",
        "ollm_cli.pipeline.service._messages",
        "ollm_cli.pipeline.service._wire",
        "ollm_cli.pipeline.coordinator._turn_result",
    } <= set(imported)
    assert [m for m in imported if _not_for_the_client(m)] == []
    # nor the messages of the chat's commands and of load runs, nor what they carry
    assert {
        "ollm_cli.pipeline.service._protocol",
        "ollm_cli.pipeline.service._socket",
        "ollm_cli.pipeline.harness",
        "ollm_cli.pipeline.compression",
        "ollm_cli.pipeline.context",
    }.isdisjoint(imported)
