"""Child processes of the crash and lock tests (started through a forkserver).

``record_forever`` records numbered messages into two sessions from two
threads and sends ``a 17`` / ``b 4`` down ``acks`` after each record returns,
until it is killed. ``hold_session`` opens a session and keeps it open until
told to stop.
"""

from __future__ import annotations

import os
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording._store import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage, SessionToolCall, ToolResult


def _store(data_dir: str) -> ChatRecordingService:
    settings = SessionSettings(data_dir=Path(data_dir), max_sessions=0, group_commit_ms=1.0)
    return ChatRecordingService(settings)


def record_forever(data_dir: str, sessions: dict[str, int], acks: Connection) -> None:
    """Record into each session (name -> first number) until killed, acknowledging each."""
    store = _store(data_dir)
    ack_lock = threading.Lock()

    def ack(line: str) -> None:
        with ack_lock:
            acks.send_bytes(line.encode())

    def record(sid: str, name: str, start: int) -> None:
        store.open_session(sid)
        ack(f"ready {name}")
        number = start
        while True:
            store.record_message(sid, SessionMessage.user(f"{name} message {number}"))
            ack(f"{name} {number}")
            if number % 4 == 0:
                store.record_tool_call(
                    sid,
                    SessionToolCall(
                        id=f"{name}-{number}",
                        name="read_file",
                        args={"n": number},
                        result=ToolResult(llm_content="x" * (number % 500)),
                    ),
                )
                ack(f"{name} tool {number}")
            if number % 9 == 0:
                store.save_session(sid)  # a turn end: the file is replaced
            number += 1

    threads = [
        threading.Thread(target=record, args=(sid, name, start), daemon=True)
        for name, (sid, start) in _named(sessions).items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _named(sessions: dict[str, int]) -> dict[str, tuple[str, int]]:
    return {chr(ord("a") + n): item for n, item in enumerate(sessions.items())}


def hold_session(data_dir: str, session_id: str, conn: Connection) -> None:
    """Open ``session_id``, say so with our pid, and hold it until told to stop."""
    store = _store(data_dir)
    store.open_session(session_id)
    store.record_message(session_id, SessionMessage.user("held by the child"))
    conn.send(("held", os.getpid()))
    conn.recv()
    store.close()
    conn.send("closed")
