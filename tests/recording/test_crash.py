"""Crashes and concurrency: SIGKILL at random moments, a second writer, many writers.

The crash test runs a child process that records into two sessions from two
threads and acknowledges each record after ``record_message`` returned; it is
killed with SIGKILL at a random moment, about twenty times. After every kill
each acknowledged record must be there (read without the lock, then resumed
by the next child) and every session file must parse.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import re
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from pathlib import Path

import orjson
import pytest

from ollm_cli.pipeline.errors import SessionLockedError
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import Session, SessionMessage
from tests.recording import crash_child
from tests.recording.conftest import make_settings

KILLS = 20
_ACK = re.compile(r"([ab]) (tool )?(\d+)")


@pytest.fixture(scope="module")
def forkserver() -> Iterator[ForkServerContext]:
    """Children forked from a clean server that already imported the store."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["tests.recording.crash_child"])
    yield context


def _read_acks(acks: Connection, lines: list[str]) -> None:
    while True:
        try:
            lines.append(acks.recv_bytes().decode())
        except (EOFError, OSError):
            return


def _numbers(session: Session, name: str) -> tuple[list[int], list[int]]:
    messages = [int(m.text.rsplit(" ", 1)[1]) for m in session.messages]
    tools = [int(c.id.split("-")[1]) for c in session.tool_calls]
    assert all(m.text.startswith(f"{name} message ") for m in session.messages)
    return messages, tools


def test_sigkill_at_random_moments_loses_no_acknowledged_record(
    sessions_dir: Path, forkserver: ForkServerContext
) -> None:
    settings = make_settings(sessions_dir)
    with ChatRecordingService(settings) as setup:
        ids = {name: setup.create_session("m", "p") for name in "ab"}
    acked: dict[str, set[int]] = {"a": set(), "b": set()}
    acked_tools: dict[str, set[int]] = {"a": set(), "b": set()}
    following = {"a": 0, "b": 0}
    rng = random.Random(20240601)
    for _ in range(KILLS):
        receiver, sender = forkserver.Pipe(duplex=False)
        child = forkserver.Process(
            target=crash_child.record_forever,
            args=(str(sessions_dir), {ids[n]: following[n] for n in "ab"}, sender),
        )
        child.start()
        sender.close()
        lines: list[str] = []
        reader = threading.Thread(target=_read_acks, args=(receiver, lines))
        reader.start()
        # killed once it has acknowledged a seeded number of records: somewhere in the
        # middle of recording the next ones, in either thread
        acks_before_kill = 2 + rng.randint(0, 150)
        deadline = time.monotonic() + 30
        while sum(line.startswith("ready") for line in lines) < 2 or len(lines) < acks_before_kill:
            assert time.monotonic() < deadline and child.is_alive(), lines
            time.sleep(0.001)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        reader.join(30)
        receiver.close()
        assert child.exitcode == -signal.SIGKILL
        for line in lines:
            match = _ACK.fullmatch(line)
            if match:
                (acked_tools if match[2] else acked)[match[1]].add(int(match[3]))

        for path in sessions_dir.glob("*.json"):  # every file parses, whenever the kill came
            Session.from_json(path.read_bytes())
        with ChatRecordingService(settings) as reader_store:  # a reader: no lock, journal folded in
            for name in "ab":
                messages, tools = _numbers(reader_store.get_session(ids[name]), name)
                assert acked[name] <= set(messages)
                assert acked_tools[name] <= set(tools)
                assert len(messages) == len(set(messages)), "a record was replayed twice"
                assert messages == sorted(messages)
                following[name] = (max(messages) + 1) if messages else 0
    assert all(len(acked[name]) > KILLS for name in "ab")
    with ChatRecordingService(settings) as final:
        for name in "ab":
            resumed = final.open_session(ids[name])
            assert acked[name] <= set(_numbers(resumed, name)[0])
    assert not list((sessions_dir / ".journal").glob("*.wal")), "dead journals were folded in"


def test_a_second_writer_is_refused_naming_the_process(
    sessions_dir: Path, forkserver: ForkServerContext
) -> None:
    settings = make_settings(sessions_dir)
    with ChatRecordingService(settings) as setup:
        sid = setup.create_session("m", "p")
        setup.record_message(sid, SessionMessage.user("before the child"))
    parent_end, child_end = forkserver.Pipe()
    child = forkserver.Process(
        target=crash_child.hold_session, args=(str(sessions_dir), sid, child_end)
    )
    child.start()
    try:
        assert parent_end.poll(30)
        state, pid = parent_end.recv()
        assert (state, pid) == ("held", child.pid)
        with ChatRecordingService(settings) as second:
            with pytest.raises(SessionLockedError, match=rf"process {pid}\b"):
                second.open_session(sid)
            with pytest.raises(SessionLockedError, match=str(pid)):
                second.record_message(sid, SessionMessage.user("refused"))
            with pytest.raises(SessionLockedError):
                second.delete_session(sid)
            with pytest.raises(SessionLockedError):
                second.set_title(sid, "not while it is written")
            # readers are never blocked, and see the child's journaled record
            texts = [m.text for m in second.get_session(sid).messages]
            assert texts == ["before the child", "held by the child"]
            assert [s.session_id for s in second.list_sessions()] == [sid]
        parent_end.send("stop")
        assert parent_end.poll(30) and parent_end.recv() == "closed"
        with ChatRecordingService(settings) as after:
            assert len(after.open_session(sid).messages) == 2
    finally:
        child.join(30)
        if child.is_alive():  # pragma: no cover - only if the child hangs
            child.kill()


def test_many_sessions_recorded_in_parallel_lose_and_mix_nothing(
    store: ChatRecordingService,
) -> None:
    writers, per_writer = 24, 30
    ids = [store.create_session("m", "p") for _ in range(writers)]
    shared = store.create_session("m", "p")
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(per_writer):
                store.record_message(ids[n], SessionMessage.user(f"w{n} #{i}"))
                store.record_message(shared, SessionMessage.assistant(f"w{n} #{i}"))
                if i % 10 == 9:
                    store.save_session(ids[n])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert store.health().ok
    store.close()
    with ChatRecordingService(store.settings) as reader:
        for n, sid in enumerate(ids):
            texts = [m.text for m in reader.get_session(sid).messages]
            assert texts == [f"w{n} #{i}" for i in range(per_writer)]
        mixed = [m.text for m in reader.get_session(shared).messages]
        assert sorted(mixed) == sorted(
            f"w{n} #{i}" for n in range(writers) for i in range(per_writer)
        )
        for n in range(writers):  # each writer's records keep their order in the shared session
            mine = [t for t in mixed if t.startswith(f"w{n} #")]
            assert mine == [f"w{n} #{i}" for i in range(per_writer)]
        data = orjson.loads((reader.data_dir / f"{shared}.json").read_bytes())
        assert len(data["messages"]) == writers * per_writer
