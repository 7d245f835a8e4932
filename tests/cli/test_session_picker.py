"""The resume picker, the replay after a resume, ``--continue`` per folder, ``/model``
and ``/sessions``: as a user types them in a real pty, on both runtimes, and the
picker's lines and filter on their own."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from ollm_cli.cli.session_picker import Choice, SessionChoices, _numbered_pick, one_line
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage, SessionSummary
from ollm_cli.pipeline.terminal_text import has_control, strip_control
from tests.cli.conftest import ollm_env, shared_for
from tests.cli.test_run_cmd import OLLM, RUNTIMES, sessions
from tests.fake_ollama import FakeModel, FakeOllama, Reply

TITLES = {"dragon": "Welsh dragon lore", "trip": "Trip to Rome " + "with a long title " * 6}


def _reply(body: dict[str, Any]) -> Reply:
    last = str(body["messages"][-1]["content"])
    if last.startswith("Write a title"):
        return Reply.text(next((t for k, t in TITLES.items() if k in last), "Small talk"))
    return Reply.text(f"You said: {last}")


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        fake.models.append(FakeModel(name="qwen3:8b", family="qwen3"))
        fake.default_reply = _reply
        yield fake


@pytest.fixture(params=RUNTIMES)
def env(
    request: pytest.FixtureRequest, server: FakeOllama, ollm_home: Path, tmp_path: Path
) -> Iterator[dict[str, str]]:
    runtime = str(request.param)
    with ollm_env(
        runtime,
        server.url,
        ollm_home,
        tmp_path,
        shared=shared_for(request, runtime),
        check_stop=False,
        COLUMNS="80",
        PROMPT_TOOLKIT_NO_CPR="1",  # pexpect's pty answers no cursor-position query
    ) as values:
        yield values


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*OLLM, "run", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    return done


def _summary(sid: str, title: str, count: int = 2, tags: list[str] | None = None) -> SessionSummary:
    return SessionSummary(
        session_id=sid,
        start_time="2026-11-26T10:00:00Z",
        last_activity="2026-11-26T10:30:00Z",
        model="m",
        title=title,
        message_count=count,
        tags=tags or [],
    )


# --------------------------------------------------------------------- the lines


@settings(max_examples=200)
@given(title=st.text(max_size=300), width=st.integers(min_value=20, max_value=200))
def test_a_session_line_fits_the_width_and_holds_no_control_sequence(
    title: str, width: int
) -> None:
    line = Choice.of(_summary("3f1c2a9e-0000-4000-8000-000000000000", title)).line(width)
    assert cell_len(line) <= width
    assert "\n" not in line and not has_control(line)
    assert line.startswith("3f1c2a9e")


@pytest.mark.parametrize("width", [80, 120])
def test_a_long_title_is_cut_with_an_ellipsis_on_one_line(width: int) -> None:
    title = "Plan the \x1b[2Jtrip to 京都 and Rome " * 10
    line = Choice.of(_summary("3f1c2a9e-0000", title, count=12)).line(width)
    assert cell_len(line) <= width and "…" in line and "\x1b" not in line
    assert line.endswith("12 msg") and "trip to 京都" in line


# -------------------------------------------------------------------- the filter


def _store_with_sessions(tmp_path: Path) -> tuple[ChatRecordingService, dict[str, str]]:
    from ollm_cli.config.settings import SessionSettings

    store = ChatRecordingService(SessionSettings(data_dir=tmp_path / "sessions"))
    ids = {}
    for name, text, tags in [
        ("dragon", "tell me about the red dragon of Wales", []),
        ("trip", "plan a trip to Rome", ["travel"]),
        ("math", "what is 2+2", []),
    ]:
        sid = store.create_session("m", "ollama", tags=tags or None)
        store.record_message(sid, SessionMessage.user(text))
        store.set_title(sid, f"{name} title")
        store.close_session(sid)
        ids[name] = sid
    ids["empty"] = store.create_session("m", "ollama", title="an empty dragon")
    store.close_session(ids["empty"])
    return store, ids


def test_typing_filters_by_title_tags_and_message_text_and_hides_empty_sessions(
    tmp_path: Path,
) -> None:
    store, ids = _store_with_sessions(tmp_path)
    choices = SessionChoices(store.list_sessions(), lambda q: store.search(q, limit=50))
    assert {c.session_id for c in choices.all} == {ids["dragon"], ids["trip"], ids["math"]}
    assert [c.session_id for c in choices.matching("trip")] == [ids["trip"]]
    assert [c.session_id for c in choices.matching("travel")] == [ids["trip"]]
    assert [c.session_id for c in choices.matching(ids["math"][:6])] == [ids["math"]]
    # "wales" is only in a message: the store's search finds it, with a snippet
    [found] = choices.matching("wales")
    assert found.session_id == ids["dragon"] and "Wales" in (found.snippet or "")
    assert choices.matching("kube") == []
    assert choices.matching("!!!") == []  # no word to search for: nothing, no error
    store.close()


def test_the_numbered_picker_filters_by_words_and_never_takes_them_for_an_id(
    tmp_path: Path,
) -> None:
    from ollm_cli.cli.output import err_console

    store, ids = _store_with_sessions(tmp_path)
    choices = SessionChoices(store.list_sessions(), lambda q: store.search(q, limit=50))
    answers = iter(["nothing-like-this", "wales", "1"])
    asked: list[str] = []

    def read_line(question: str) -> str:
        asked.append(question)
        return next(answers)

    with err_console.capture() as captured:
        chosen = _numbered_pick(choices, lambda sid, width: [], err_console, read_line)
    assert chosen == ids["dragon"]
    shown = captured.get()
    assert "no session matches 'nothing-like-this'" in shown
    assert "is not a session id" not in shown and len(asked) == 3
    assert _numbered_pick(choices, lambda sid, width: [], err_console, lambda q: "") is None
    store.close()


def test_one_line_strips_escape_sequences_and_newlines() -> None:
    assert one_line("a\x1b]52;c;aGk=\x07b\n\nc\u202e") == "ab c"


# ------------------------------------------------------------ in a real terminal


def test_the_picker_filters_resumes_replays_and_model_switches(
    server: FakeOllama, env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    _run(env, tmp_path, "-p", "tell me about the red dragon of Wales")
    _run(env, tmp_path, "-p", "plan a trip \x1b[2Jto Rome " + "with a very long title " * 6)
    _run(env, tmp_path, "-p", "what is 2+2")
    store = sessions(ollm_home)
    empty = store.create_session("llama3.2:latest", "ollama", title="empty one")
    store.close_session(empty)
    [hit] = store.search("wales")
    dragon = store.get_session(hit.session_id)
    store.close()

    child = pexpect.spawn(
        OLLM[0],
        [*OLLM[1:], "run", "--resume"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=90,
        dimensions=(24, 80),
    )
    try:
        child.expect_exact("resume a session")
        child.send("wales")  # only in a message (not the newest): the store's search finds it
        child.send("\r")
        child.expect_exact(f"resuming {dragon.session_id[:8]}")
        child.expect_exact("the last 1 exchange(s) of 1")
        child.expect_exact("You said: tell me about the red dragon of Wales")
        child.expect("› ")
        before = child.before or ""
        assert "empty one" not in before and "\x1b[2J" not in before
        assert "is not a session id" not in before

        child.sendline("/model")
        child.expect_exact("qwen3:8b")
        child.expect("› ")
        child.sendline("/model qwen3:8b")
        child.expect_exact("llama3.2:latest → qwen3:8b")
        child.expect("› ")
        child.sendline("/model no-such-model")
        child.expect_exact("ollama pull no-such-model")
        child.expect("› ")
        child.sendline("hello again")
        child.expect_exact("You said: hello again")
        child.expect("› ")

        child.sendline("/sessions")
        child.expect("› ")
        listed = [line for line in (child.before or "").splitlines() if " msg" in line]
        assert len(listed) == 3, child.before
        assert all(cell_len(strip_control(line).rstrip("\r")) <= 80 for line in listed), listed
        assert any("…" in line for line in listed)

        child.sendline("/resume")
        child.expect_exact("resume a session")
        child.send("\x1b")
        child.expect_exact("staying in this session")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    asked = [r["model"] for r in server.chat_requests if "hello again" in str(r["messages"])]
    assert asked and asked[-1] == "qwen3:8b"
    store = sessions(ollm_home)
    session = store.get_session(dragon.session_id)
    store.close()
    [change] = session.metadata.mode_history
    assert change["from"] == "llama3.2:latest" and change["to"] == "qwen3:8b"
    assert change["kind"] == "model" and session.model == "qwen3:8b"


def test_continue_takes_the_latest_session_of_this_folder(
    env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    _run(env, here, "-p", "first here")
    last = _run(env, there, "-p", "first there").stderr.split("session ")[-1].strip()
    store = sessions(ollm_home)
    mine = next(s.session_id for s in store.list_sessions() if not s.session_id.startswith(last))
    store.close()
    again = _run(env, here, "--continue", "-p", "second here")
    assert f"continuing {mine[:8]}" in again.stderr
    # from the other folder, --any takes the latest of all: the one just continued
    anywhere = _run(env, there, "--continue", "--any", "-p", "third, from there")
    assert f"continuing {mine[:8]}" in anywhere.stderr
    store = sessions(ollm_home)
    users = sorted(
        [m.text for m in store.get_session(s.session_id).messages if m.role == "user"]
        for s in store.list_sessions()
    )
    store.close()
    assert users == [["first here", "second here", "third, from there"], ["first there"]]


def test_model_given_on_a_resume_is_recorded_as_a_switch(
    env: dict[str, str], ollm_home: Path, tmp_path: Path
) -> None:
    _run(env, tmp_path, "-p", "first")
    _run(env, tmp_path, "--continue", "--model", "qwen3:8b", "-p", "second")
    _run(env, tmp_path, "--continue", "-p", "third")  # goes on with qwen3:8b
    store = sessions(ollm_home)
    [summary] = store.list_sessions()
    session = store.get_session(summary.session_id)
    store.close()
    assert session.model == "qwen3:8b"
    [change] = session.metadata.mode_history
    assert (change["from"], change["to"], change["trigger"]) == (
        "llama3.2:latest",
        "qwen3:8b",
        "--model",
    )
    nowhere = tmp_path / "elsewhere"
    nowhere.mkdir()
    refused = subprocess.run(
        [*OLLM, "run", "--continue", "-p", "x"],
        env=env,
        cwd=nowhere,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert refused.returncode == 4
    assert "no session to continue in this folder" in refused.stderr
    assert "--continue --any" in refused.stderr


@pytest.mark.parametrize("width", [80, 120])
def test_sessions_command_gives_one_line_per_session_at_the_terminal_width(
    server: FakeOllama, ollm_home: Path, tmp_path: Path, width: int
) -> None:
    import io

    from ollm_cli.cli.chat_repl import ChatRepl
    from ollm_cli.cli.loop_thread import LoopThread
    from ollm_cli.cli.output import SafeConsole
    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.runtime import create_runtime

    settings = OllmSettings()
    settings.provider.name = "ollama"
    settings.provider.model = "llama3.2:latest"
    settings.provider.ollama.host = server.url
    settings.services.context.load_project_files = False
    store = sessions(ollm_home)
    for n in range(3):
        sid = store.create_session("m", "ollama")
        store.record_message(sid, SessionMessage.user(f"message {n}"))
        title = f"session {n} \x1b]0;evil\x07 " + "with a title far too long " * 8
        store.update_metadata(sid, title=title)  # as an imported session may hold it
        store.close_session(sid)
    store.close()
    out = io.StringIO()
    shown = SafeConsole(file=out, width=width, no_color=True)
    lines = iter(["/sessions", "/exit"])
    loop = LoopThread()
    runtime = create_runtime(settings, tmp_path, kind="inprocess")
    repl = ChatRepl(loop, shown, shown, read_line=lambda prompt: next(lines))
    repl.coordinator = Coordinator(runtime, settings, workspace=tmp_path)
    try:
        loop.run(runtime.start())
        repl.chat(loop.run(repl.coordinator.start_session()))
        for sid in list(repl.coordinator.conversations):
            loop.run(repl.coordinator.end_session(sid))
    finally:
        loop.run(runtime.shutdown())
        loop.close()
    listed = [line for line in out.getvalue().splitlines() if "1 msg" in line]
    assert len(listed) == 3, out.getvalue()  # the chat's own empty session is not listed
    assert all(cell_len(line) <= width and "…" in line for line in listed)
    assert "\x1b" not in out.getvalue()
