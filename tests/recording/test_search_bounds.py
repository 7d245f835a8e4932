"""Search stays bounded whatever is stored (issue 35, item 7): one 60 MB message written
straight into a session file (not through an import) once made every ``ollm sessions
search`` take 73 s and 1.2 GB. The index keeps the first ``SEARCHED_CHARS`` of each
text, reads a large file as a stream whose strings are cut short, and takes a
snippet from a window of the text; a large file is indexed as a small one is."""

from __future__ import annotations

import io
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from ollm_cli.pipeline.recording import MARK_END, MARK_START
from ollm_cli.pipeline.recording._document import SessionDocument
from ollm_cli.pipeline.recording._index import (
    SEARCHED_CHARS,
    SNIPPET_WINDOW,
    SessionIndex,
    message_text,
    tool_call_text,
)
from ollm_cli.pipeline.recording._stream import STREAM_BYTES, IndexedStream
from ollm_cli.pipeline.records import Session, SessionMessage, SessionMetadata
from tests.cli.conftest import run_ollm
from tests.recording.strategies import messages, tool_calls

SIXTY_MB = 60_000_000


def words(count: int, start: int = 0) -> str:
    return " ".join(f"w{(start + n) % 5000:04d}" for n in range(count))  # 6 bytes a word


def big_text(size: int) -> str:
    """``size`` bytes of words, quickly: 5,000 different words over and over."""
    block = words(5000) + " "
    return block * (size // len(block)) + words((size % len(block)) // 6)


def write_session(folder: Path, *texts: str, title: str = "big one") -> str:
    """A session file holding a user message of each of ``texts`` (then a short answer),
    written straight into ``folder`` as a session file, as no import would."""
    sid = str(uuid.uuid4())
    chat = [
        {
            "role": "user",
            "parts": [{"type": "text", "text": t}],
            "timestamp": "2025-01-01T00:00:00Z",
        }
        for t in texts
    ]
    chat.append(SessionMessage.assistant("a short answer about kubernetes").to_dict())
    data = {
        "sessionId": sid,
        "startTime": "2025-01-01T00:00:00Z",
        "lastActivity": "2025-01-01T00:01:00Z",
        "model": "llama3.2",
        "provider": "ollama",
        "messages": chat,
        "toolCalls": [],
        "metadata": SessionMetadata(title=title).to_dict(),
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{sid}.json").write_bytes(orjson.dumps(data))
    return sid


def search(*args: str) -> list[dict[str, Any]]:
    done = run_ollm("search", *args, "--json")
    assert done.returncode == 0, done.stderr
    hits: list[dict[str, Any]] = orjson.loads(done.stdout)
    return hits


def test_a_60_mb_message_in_a_session_file_is_searched_within_bounds(
    tmp_path: Path, ollm_home: Path
) -> None:
    big = "zyxomatic " + big_text(SIXTY_MB) + " quuxword"  # the last word: past the bound
    sid = write_session(ollm_home / "sessions", big, "a second question about helm")
    # the commands a user runs, as real processes
    [hit] = search("zyxomatic")
    assert hit["sessionId"] == sid and (hit["where"], hit["index"]) == ("message", 0)
    assert hit["snippet"].startswith(f"{MARK_START}zyxomatic{MARK_END}")
    [hit] = search("helm")
    assert (hit["where"], hit["index"]) == ("message", 1)  # the messages after it count
    [hit] = search("kube")
    assert (hit["where"], hit["index"], hit["role"]) == ("message", 2, "assistant")
    assert search("quuxword") == []  # past the first SEARCHED_CHARS of the message
    listed = orjson.loads(run_ollm("list", "--json").stdout)
    assert (listed[0]["messageCount"], listed[0]["title"]) == (3, "big one")
    # what the index holds of it: no more than SEARCHED_CHARS
    index = SessionIndex(ollm_home / "sessions")
    try:
        longest = index._conn.execute("SELECT max(length(text)) FROM fts").fetchone()[0]
    finally:
        index.close()
    assert SEARCHED_CHARS - 10 <= longest <= SEARCHED_CHARS


def test_indexing_a_60_mb_message_holds_no_copy_of_it(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    write_session(folder, big_text(SIXTY_MB))
    assert (next(folder.glob("*.json"))).stat().st_size >= STREAM_BYTES
    index = SessionIndex(folder)
    tracemalloc.start()
    try:
        index.refresh()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        index.close()
    assert peak < 16 * SEARCHED_CHARS  # read whole, the file alone was 60 MB, its text 60 more


def test_a_word_deep_in_a_long_message_gets_a_snippet_around_it(
    tmp_path: Path, ollm_home: Path
) -> None:
    long = words(100_000) + " needleword " + words(50_000, start=7)
    write_session(ollm_home / "sessions", long)
    [hit] = search("needleword")
    snippet = hit["snippet"]
    assert f"{MARK_START}needleword{MARK_END}" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) < SNIPPET_WINDOW // 4
    # every word is in the message, never in one window: a snippet still shows one
    [hit] = search("needleword w0000")
    assert MARK_START in hit["snippet"]


def test_a_damaged_large_file_is_named_and_left_out(tmp_path: Path, ollm_home: Path) -> None:
    folder = ollm_home / "sessions"
    secret = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    sid = write_session(folder, big_text(STREAM_BYTES + 100), f"token {secret} and more")
    path = folder / f"{sid}.json"
    data = path.read_bytes()
    path.write_bytes(data.replace(b" and more", b" \xff\xfe"))  # not UTF-8, after the secret
    other = write_session(folder, "a small one about zyxomatic", title="small")
    done = run_ollm("search", "zyxomatic", "--json")
    assert [h["sessionId"] for h in orjson.loads(done.stdout)] == [other]
    # named as damaged, why, and never with the text around the damage
    assert f"{sid}.json is damaged (not valid JSON (lexical error: invalid bytes in UTF8" in (
        " ".join(done.stderr.split())
    )
    assert secret not in done.stderr + done.stdout
    told = run_ollm("doctor")
    assert sid[:8] in told.stdout + told.stderr


@given(st.lists(messages, max_size=5), st.lists(tool_calls, max_size=3), st.integers(24, 400))
def test_property_a_file_read_as_a_stream_is_indexed_as_when_read_whole(
    chat: list[SessionMessage], calls: list[Any], limit: int
) -> None:
    """Whatever a session holds, the streamed reading gives the index the same items and
    the same header as the whole reading; with strings cut to ``limit`` bytes, the same
    items still, each text within the bound (a bound above the longest key of a session
    file, as :data:`SEARCHED_CHARS` is: keys are strings too)."""
    session = Session(
        session_id=str(uuid.UUID(int=7)),
        start_time="2025-01-01T00:00:00Z",
        last_activity="2025-01-01T00:01:00Z",
        model="m",
        provider="p",
        messages=chat,
        tool_calls=calls,
        metadata=SessionMetadata(title="t", tags=["a"], token_count=12),
    )
    raw = orjson.dumps(session.to_dict())
    whole = SessionDocument.decode(raw)
    expected = [("message", n, message_text(m)) for n, m in enumerate(whole.messages)]
    expected += [("toolCall", n, tool_call_text(c)) for n, c in enumerate(whole.tool_calls)]

    def texts(stream: IndexedStream, bound: int) -> list[tuple[str, int, str]]:
        return [
            (
                kind,
                n,
                message_text(item, bound) if kind == "message" else tool_call_text(item, bound),
            )
            for kind, n, item in stream.items()
        ]

    stream = IndexedStream(io.BytesIO(raw), SEARCHED_CHARS)
    assert texts(stream, SEARCHED_CHARS) == expected
    assert (stream.message_count, stream.tool_call_count) == (len(chat), len(calls))
    header = SessionDocument.from_data({**stream.header, "messages": [], "toolCalls": []})
    assert header.data == {**whole.data, "messages": [], "toolCalls": []}
    cut = texts(IndexedStream(io.BytesIO(raw), limit), limit)
    assert [(k, n) for k, n, _ in cut] == [(k, n) for k, n, _ in expected]
    assert all(len(text) <= limit for _, _, text in cut)
