"""What the resume picker costs per keystroke: filtering ``--sessions`` sessions of a
few messages each, as the inline list does on every character typed.

It lists the 200 most recent sessions with messages once (what the picker opens
with), then times :meth:`~ollm_cli.cli.session_picker.SessionChoices.matching` for
growing prefixes of a word found only in messages (so the store's full-text search
runs) and of a title word, with the cache of earlier answers emptied each time;
each figure is the median of ``--rounds`` calls, in this process, on the store
directly (the service adds one socket round trip per search).

    python -m bench.picker [--sessions 2000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from ollm_cli.cli.session_picker import OFFERED, SEARCHED, SessionChoices
from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.records import SessionMessage

WORDS = ["kubernetes", "dragon", "invoice", "rome", "docker", "budget", "garden", "python"]


def build(folder: Path, count: int) -> ChatRecordingService:
    store = ChatRecordingService(SessionSettings(data_dir=folder, max_sessions=count + 10))
    for n in range(count):
        sid = store.create_session("m", "ollama")
        word = WORDS[n % len(WORDS)]
        store.record_message(sid, SessionMessage.user(f"question {n} about the {word} setup"))
        store.record_message(sid, SessionMessage.assistant(f"answer {n}: configure {word} so"))
        store.set_title(sid, f"Session {n} on {WORDS[(n + 3) % len(WORDS)]} plans")
        store.close_session(sid)
    return store


def median_ms(store: ChatRecordingService, query: str, rounds: int) -> tuple[float, int]:
    recent = store.list_sessions(limit=OFFERED, min_messages=1)
    times = []
    found = 0
    for _ in range(rounds):
        choices = SessionChoices(recent, lambda q: store.search(q, limit=SEARCHED))
        start = time.perf_counter()
        found = len(choices.matching(query))
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store = build(Path(tmp) / "sessions", args.sessions)
        built = time.perf_counter() - start
        start = time.perf_counter()
        store.list_sessions(limit=OFFERED, min_messages=1)
        opened = (time.perf_counter() - start) * 1000
        print(
            f"{args.sessions} sessions written in {built:.1f} s; the picker's list: {opened:.2f} ms"
        )
        print(f"{'typed':<12} {'median ms':>10} {'choices':>8}")
        for word in ("configure", "kubernetes"):
            for end in (2, 4, len(word)):
                ms, found = median_ms(store, word[:end], args.rounds)
                print(f"{word[:end]:<12} {ms:>10.2f} {found:>8}")
        store.close()


if __name__ == "__main__":
    main()
