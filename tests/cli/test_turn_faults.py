"""``ollm run`` under faults: a full disk (a real tmpfs), kill -9 and Ctrl-C while an
answer streams (a chat driven through a pseudo-terminal), against a real
Ollama-speaking server on 127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session, SessionMessage
from tests.fake_ollama import FakeOllama, Reply
from tests.recording.conftest import mounted_tmpfs
from tests.waiting import wait_until

MODEL = "llama3.2:latest"
OLLM = [sys.executable, "-c", "from ollm_cli.cli.app import main; main()"]


@pytest.fixture
def server() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        yield fake


def ollm_env(server: FakeOllama, home: Path, sessions: Path, **extra: str) -> dict[str, str]:
    values = {k: v for k, v in os.environ.items() if not k.startswith("OLLM_")}
    values.update(
        {
            "OLLM_HOME": str(home),
            "OLLM_PROVIDER": "ollama",
            "OLLM_OLLAMA_HOST": server.url,
            "OLLM_MODEL": MODEL,
            "OLLM_RUNTIME__KIND": "inprocess",
            "OLLM_SERVICES__SESSION__DATA_DIR": str(sessions),
            "OLLM_SERVICES__CONTEXT__LOAD_PROJECT_FILES": "false",
            "OLLM_SERVICES__COMPRESSION__ENABLED": "false",
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }
    )
    values.update(extra)
    return values


def run_ollm(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OLLM, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def fill(path: Path) -> None:
    """Fill the filesystem of ``path`` to the last byte."""
    with open(path, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                handle.write(b"\0")
        except OSError:
            pass


def read_session(sessions: Path, session_id: str) -> Session:
    with ChatRecordingService(SessionSettings(data_dir=sessions, max_sessions=0)) as store:
        return store.get_session(session_id)


def texts(session: Session) -> list[str]:
    return [m.text for m in session.messages]


# -- 1. a full disk --------------------------------------------------------------------------------


def test_a_resumed_turn_on_a_full_disk_exits_4_and_is_rescued_then_replayed(
    server: FakeOllama, tmp_path: Path
) -> None:
    rescue = tmp_path / "rescue"  # another filesystem than the tmpfs
    with mounted_tmpfs(tmp_path / "small", "2m") as disk:
        sessions = disk / "sessions"
        env = ollm_env(
            server,
            tmp_path / "home",
            sessions,
            OLLM_SERVICES__SESSION__RESCUE_DIRS=f'["{rescue}"]',
        )
        server.script(Reply.text("first answer"))
        first = run_ollm(env, tmp_path, "run", "-p", "first question")
        assert first.returncode == 0, first.stderr
        [name] = [n for n in os.listdir(sessions) if n.endswith(".json")]
        sid = name.removesuffix(".json")

        fill(disk / "filler")
        server.script(Reply.text("the answer nobody saved"))
        second = run_ollm(env, tmp_path, "run", "--resume", sid[:8], "-p", "second question")
        assert second.returncode == 4, second.stderr
        error = " ".join(second.stderr.split())
        assert "the turn was not saved" in error
        assert "No space left on device" in error
        [rescued] = list(rescue.iterdir())
        assert str(rescued) in error
        # nothing of the second turn reached the full disk
        assert texts(read_session(sessions, sid)) == ["first question", "first answer"]

        (disk / "filler").unlink()
        server.script(Reply.text("third answer"))
        third = run_ollm(env, tmp_path, "run", "--resume", sid[:8], "-p", "third question")
        assert third.returncode == 0, third.stderr
        assert "replayed" in third.stderr and str(rescued) in " ".join(third.stderr.split())
        assert not rescued.exists()
        assert texts(read_session(sessions, sid)) == [
            "first question",
            "first answer",
            "second question",
            "the answer nobody saved",
            "third question",
            "third answer",
        ]


# -- 2. kill -9 and Ctrl-C while an answer streams ------------------------------------------------


def spawn_chat(env: dict[str, str], cwd: Path, *args: str) -> pexpect.spawn:
    child = pexpect.spawn(
        OLLM[0], [*OLLM[1:], "run", *args], env=env, cwd=str(cwd), encoding="utf-8", timeout=60
    )
    child.expect("› ")
    return child


def session_id_of(sessions: Path) -> str:
    [name] = [n for n in os.listdir(sessions) if n.endswith(".json")]
    return name.removesuffix(".json")


def slow_words(count: int) -> list[str]:
    return [f"word{n} " for n in range(count)]


def test_kill_9_while_an_answer_streams_leaves_the_shown_words_on_disk(
    server: FakeOllama, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    env = ollm_env(server, tmp_path / "home", sessions)
    release = threading.Event()
    words = slow_words(40)
    server.script(Reply(chunks=words, delay=0.02, hold=release, hold_after=30))
    child = spawn_chat(env, tmp_path)
    child.sendline("tell me a long story")
    child.expect("word29")  # 30 words shown; the server holds the rest
    shown = "".join(words[:30])

    def shown_part_recorded() -> bool:  # within streamRecordMs of being shown
        if not any(name.endswith(".json") for name in os.listdir(sessions)):
            return False
        recorded = read_session(sessions, session_id_of(sessions)).messages[1:]
        return bool(recorded) and recorded[0].text == shown

    wait_until(shown_part_recorded, what="the shown part of the answer on disk")
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    release.set()
    session = read_session(sessions, session_id_of(sessions))
    assert session.messages[0].text == "tell me a long story"
    [answer] = session.messages[1:]
    assert answer.role == "assistant"
    assert answer.text == "".join(words[:30])
    assert (answer.model_extra or {}).get("interrupted") is True


def test_ctrl_c_records_the_shown_part_as_interrupted_and_resume_shows_it(
    server: FakeOllama, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    env = ollm_env(
        server,
        tmp_path / "home",
        sessions,
        OLLM_SERVICES__SESSION__STREAM_RECORD_MS="5000",  # only Ctrl-C can record it
    )
    release = threading.Event()
    words = slow_words(20)
    server.script(Reply(chunks=words, hold=release, hold_after=12))
    child = spawn_chat(env, tmp_path)
    child.sendline("count slowly")
    child.expect("word11")
    child.sendintr()
    child.expect("interrupted")
    child.expect("› ")
    release.set()
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    sid = session_id_of(sessions)
    session = read_session(sessions, sid)
    assert texts(session) == ["count slowly", "".join(words[:12])]
    assert (session.messages[1].model_extra or {}).get("interrupted") is True

    child = spawn_chat(env, tmp_path, "--resume", sid[:8])
    shown = re.sub(r"\s+", " ", child.before or "")
    assert "the last answer was interrupted" in shown
    assert "word11" in shown
    child.sendeof()
    child.expect(pexpect.EOF)


def test_the_chat_warns_while_the_disk_is_full_and_says_when_saved_again(
    server: FakeOllama, tmp_path: Path
) -> None:
    with mounted_tmpfs(tmp_path / "small", "2m") as disk:
        sessions = disk / "sessions"
        env = ollm_env(server, tmp_path / "home", sessions)
        server.default_reply = lambda body: Reply.text("fine")
        child = spawn_chat(env, tmp_path)
        child.sendline("before")
        child.expect("fine")
        child.expect("› ")
        fill(disk / "filler")
        big = "while full " + "x" * 6000  # more than the journal's last page holds
        child.sendline(big)
        child.expect("NOT SAVED")
        child.expect("No space left")
        child.expect("› ")
        child.sendline("still full")
        child.expect("NOT SAVED")  # it stays until the records are written
        child.expect("› ")
        (disk / "filler").unlink()
        child.sendline("space again")
        child.expect("saved again")
        child.expect("› ")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
        session = read_session(sessions, session_id_of(sessions))
        users = [m.text for m in session.messages if m.role == "user"]
        assert users[0] == "before" and users[2:] == ["still full", "space again"]
        assert users[1].startswith("while full xxxx")  # the terminal cuts a long line


def test_partial_answers_never_slow_the_stream_or_outlive_the_answer(tmp_path: Path) -> None:
    """The store side of 2: a part is replaced by the answer; a part left behind (the
    writer died) becomes an interrupted answer when the session is opened again."""
    settings = SessionSettings(data_dir=tmp_path / "s", max_sessions=0, group_commit_ms=0)
    store = ChatRecordingService(settings)
    sid = store.create_session("m", "p")
    store.record_message(sid, SessionMessage.user("q"))
    store.record_partial(sid, SessionMessage.assistant("par"))
    store.record_partial(sid, SessionMessage.assistant("partial ans"))
    assert texts(store.get_session(sid)) == ["q", "partial ans"]
    store.record_message(sid, SessionMessage.assistant("partial answer, whole"))
    assert texts(store.get_session(sid)) == ["q", "partial answer, whole"]
    store.record_message(sid, SessionMessage.user("again"))
    store.record_partial(sid, SessionMessage.assistant("cut sho"))
    store._journal.close()  # the process dies: nothing more is written
    for state in store._open.values():
        state.file_lock.release()
    with ChatRecordingService(settings) as after:
        session = after.open_session(sid)
        assert texts(session) == ["q", "partial answer, whole", "again", "cut sho"]
        assert (session.messages[-1].model_extra or {}).get("interrupted") is True
        after.record_message(sid, SessionMessage.user("next"))
        assert texts(after.get_session(sid))[-2:] == ["cut sho", "next"]
