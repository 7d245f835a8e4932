"""How fast the ChatRecordingService records, resumes, lists and searches, against raw baselines.

Run with ``python -m bench.sessions [--quick]``. Every figure is measured
against a baseline taken in the same run, on the same disk:

====================================================  ==============================================
figure                                                target
====================================================  ==============================================
durable messages/s, 256 sessions recording at once    >= 1/2 of raw ``write``+``fdatasync`` appends
one message recorded, p50 and p99                     p50 <= one raw append+fdatasync + 2 ms
resume a 10,000-message (~20 MB) session              <= 3 x ``orjson.loads`` of the same bytes
list 10,000 sessions (small and large ones)           < 100 ms, the same for small and large
full-text search across 10,000 sessions               >= 10 x faster than ``rg -l`` on the folder
``--huge MB``: list / view / export of one huge session  list < 1 s and < 100 MB; view and export in
                                                      < 1/4 of the memory of reading it whole
``--huge-message MB``: search a store holding one      < 2 x the time and < 2 x the memory of
message of MB written into its file, cold (the index  ``ollm sessions list`` of the same store
built) and warm; import it from a Claude Code         (the command's own cost), whatever the size
transcript, then search
====================================================  ==============================================

``--huge 200`` measures the commands as real processes (time and peak RSS) on
one 200 MB session, against the same commands made to read the session whole
(the old way) in the same run. ``--huge-message 60`` measures ``ollm sessions
search`` the same way over one 60 MB message (issue 35: it took 73 s and
1.2 GB), for a rare word and for a prefix that matches one word in 26; ``--huge-message
1`` is a smoke run of the same steps.

``--quick`` uses smaller sizes (for a smoke run); its figures are not the
targets'. The work folder is created on the same disk as the repository.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from ollm_cli.config.settings import SessionSettings
from ollm_cli.pipeline.recording import ChatRecordingService
from ollm_cli.pipeline.recording._document import SessionDocument, new_epoch
from ollm_cli.pipeline.records import (
    SessionMessage,
    SessionMetadata,
    SessionToolCall,
    TextPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    now_iso,
)

REPO = Path(__file__).resolve().parent.parent
RARE_WORD = "zyxomatic"


@dataclass
class Figure:
    """One line of the result table."""

    name: str
    value: str
    baseline: str
    target: str
    passed: bool


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _times_ms(action: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _median_ms(action: Callable[[], object], runs: int) -> float:
    return statistics.median(_times_ms(action, runs))


def _work_dir() -> Path:
    """A temp folder on the repository's disk (``/tmp`` only if it is that disk)."""
    tmp = Path(tempfile.gettempdir())
    base = tmp if os.stat(tmp).st_dev == os.stat(REPO).st_dev else REPO
    return Path(tempfile.mkdtemp(prefix=".ollm-bench-sessions-", dir=base))


class Words:
    """Deterministic filler text."""

    def __init__(self, seed: int = 7) -> None:
        self.random = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        self.vocabulary = [
            "".join(self.random.choices(letters, k=self.random.randint(2, 9))) for _ in range(4000)
        ]

    def text(self, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            word = self.random.choice(self.vocabulary)
            out.append(word)
            size += len(word) + 1
        return " ".join(out)


# -- 1 and 2: recording -----------------------------------------------------------------------


def raw_appends(folder: Path, payload: bytes, count: int) -> list[float]:
    """Seconds of each raw ``write``+``fdatasync`` append to one file."""
    path = folder / "raw-appends.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, payload)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return times


def concurrent_recording(folder: Path, sessions: int, per_session: int, text: str) -> float:
    """Durable messages per second with ``sessions`` threads recording at once."""
    store = ChatRecordingService(SessionSettings(data_dir=folder / "concurrent", max_sessions=0))
    ids = [store.create_session("bench", "bench") for _ in range(sessions)]
    barrier = threading.Barrier(sessions + 1)

    def record(sid: str) -> None:
        barrier.wait()
        for _ in range(per_session):
            store.record_message(sid, SessionMessage.user(text))

    threads = [threading.Thread(target=record, args=(sid,)) for sid in ids]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    batches = store._journal.batches
    store.close()
    total = sessions * per_session
    print(f"  {total} messages from {sessions} threads in {elapsed:.2f} s, {batches} fsync batches")
    return total / elapsed


def single_recording(folder: Path, count: int, text: str) -> tuple[list[float], list[float]]:
    """Seconds of each ``record_message`` on one session, one after the other, and of a
    raw append+fdatasync taken between each two (so that both see the same disk load)."""
    store = ChatRecordingService(SessionSettings(data_dir=folder / "single", max_sessions=0))
    sid = store.create_session("bench", "bench")
    for _ in range(20):
        store.record_message(sid, SessionMessage.user(text))
    path = folder / "raw-single.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    payload = text.encode() + b"\n"
    times, raw = [], []
    try:
        for _ in range(count):
            message = SessionMessage.user(text)
            started = time.perf_counter()
            store.record_message(sid, message)
            times.append(time.perf_counter() - started)
            started = time.perf_counter()
            os.write(fd, payload)
            os.fdatasync(fd)
            raw.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
        store.close()
    return times, raw


# -- 3: resume --------------------------------------------------------------------------------


def big_session(words: Words, messages: int, message_chars: int) -> SessionDocument:
    """A realistic long session: text turns with a tool call and its result now and then."""
    items: list[dict[str, object]] = []
    calls: list[dict[str, object]] = []
    for i in range(messages):
        if i % 10 == 3:
            call_id = f"call_{i}"
            message = SessionMessage(
                role="assistant",
                parts=[
                    TextPart(text=words.text(message_chars // 4)),
                    ToolCallPart(id=call_id, name="read_file", args={"path": f"src/m{i}.py"}),
                ],
            )
            calls.append(
                SessionToolCall(
                    id=call_id,
                    name="read_file",
                    args={"path": f"src/m{i}.py"},
                    result=ToolResult(llm_content=words.text(200), return_display="read"),
                    duration_ms=3.5,
                    success=True,
                ).to_dict()
            )
        elif i % 10 == 4:
            message = SessionMessage(
                role="tool",
                parts=[
                    ToolResultPart(
                        tool_call_id=f"call_{i - 1}",
                        name="read_file",
                        content=words.text(message_chars),
                    )
                ],
            )
        else:
            text = words.text(message_chars)
            message = SessionMessage.user(text) if i % 2 == 0 else SessionMessage.assistant(text)
        items.append(message.to_dict())
    return _document(items, calls)


def _document(
    messages: list[dict[str, object]], calls: list[dict[str, object]], **meta: object
) -> SessionDocument:
    from ollm_cli.pipeline.recording._ids import new_session_id

    now = now_iso()
    data = {
        "sessionId": new_session_id(),
        "startTime": now,
        "lastActivity": now,
        "model": "llama3.2:3b",
        "provider": "ollama",
        "messages": messages,
        "toolCalls": calls,
        "metadata": SessionMetadata.model_validate(meta).to_dict(),
    }
    return SessionDocument(data, new_epoch(), 0)


def resume(folder: Path, doc: SessionDocument, runs: int) -> tuple[float, float, int]:
    """(median ms of open_session, median ms of orjson.loads of the file, file bytes)."""
    data_dir = folder / "resume"
    data_dir.mkdir()
    path = data_dir / f"{doc.session_id}.json"
    raw = doc.encode()
    path.write_bytes(raw)
    settings = SessionSettings(data_dir=data_dir, max_sessions=0)
    opened: list[float] = []
    loads: list[float] = []
    for _ in range(runs):
        store = ChatRecordingService(settings)
        started = time.perf_counter()
        session = store.open_session(doc.session_id)
        opened.append((time.perf_counter() - started) * 1000)
        assert len(session.messages) == len(doc.messages)
        store.close()
        del session
        data = path.read_bytes()
        started = time.perf_counter()
        orjson.loads(data)
        loads.append((time.perf_counter() - started) * 1000)
    return statistics.median(opened), statistics.median(loads), len(raw)


# -- 4 and 5: listing and search ------------------------------------------------------------


def many_sessions(
    folder: Path, words: Words, count: int, messages: int, chars: int, rare_every: int
) -> set[str]:
    """Write ``count`` session files directly (setup, not measured); return the ids that
    hold the rare word."""
    folder.mkdir(parents=True)
    rare: set[str] = set()
    for n in range(count):
        items = [
            SessionMessage.of_text("user" if i % 2 == 0 else "assistant", words.text(chars))
            for i in range(messages)
        ]
        if n % rare_every == 0:
            items[-1] = SessionMessage.assistant(words.text(chars // 2) + f" {RARE_WORD} done")
        doc = _document(
            [m.to_dict() for m in items],
            [],
            title=words.text(30),
            tags=["bench", f"t{n % 10}"],
            tokenCount=messages * chars // 4,
        )
        (folder / f"{doc.session_id}.json").write_bytes(doc.encode())
        if n % rare_every == 0:
            rare.add(doc.session_id)
    return rare


def listing_and_search(
    folder: Path, words: Words, count: int, messages: int, chars: int, runs: int
) -> dict[str, float]:
    """Index, list and search ``count`` sessions; measure against ``rg -l``."""
    rare = many_sessions(folder, words, count, messages, chars, rare_every=100)
    store = ChatRecordingService(SessionSettings(data_dir=folder, max_sessions=0))
    started = time.perf_counter()
    store.reindex()
    index_s = time.perf_counter() - started
    time.sleep(0.6)  # let the folder's mtime age past the same-tick window
    scan_ms = _median_ms(lambda: store._index.refresh(force=True), max(3, runs // 3))
    summaries = store.list_sessions()
    assert len(summaries) == count, (len(summaries), count)
    list_times = _times_ms(store.list_sessions, runs)
    list_ms = statistics.median(list_times)
    page_ms = _median_ms(lambda: store.list_sessions(limit=20), runs)

    def cold_list() -> None:  # what one `ollm sessions list` pays: open a store, list
        with ChatRecordingService(SessionSettings(data_dir=folder, max_sessions=0)) as fresh:
            fresh.list_sessions()

    cold_ms = _median_ms(cold_list, max(3, runs // 3))
    hits = store.search(RARE_WORD, limit=count)
    found = {h.session_id for h in hits}
    assert found == rare, (len(found), len(rare))
    search_ms = _median_ms(lambda: store.search(RARE_WORD, limit=20), runs)
    rg = shutil.which("rg")
    rg_ms = float("nan")
    if rg:
        command = [rg, "-l", "--no-messages", RARE_WORD, str(folder)]
        rg_found = subprocess.run(command, capture_output=True, text=True, check=False).stdout
        assert len(rg_found.split()) >= len(rare)
        rg_ms = _median_ms(
            lambda: subprocess.run(command, capture_output=True, check=False), max(3, runs // 3)
        )
    store.close()
    size = sum(p.stat().st_size for p in folder.glob("*.json"))
    print(
        f"  {count} sessions of {messages} messages ({size / 1e6:.0f} MB): indexed in "
        f"{index_s:.1f} s; list all: median {list_ms:.1f} ms, best {min(list_times):.1f} ms, "
        f"in a new store {cold_ms:.1f} ms; first page of 20 {page_ms:.1f} ms; "
        f"full stat scan {scan_ms:.1f} ms; search {search_ms:.2f} ms, rg -l {rg_ms:.1f} ms"
    )
    return {"list": list_ms, "search": search_ms, "rg": rg_ms, "scan": scan_ms}


# -- the table ----------------------------------------------------------------------------------


_MEASURED = (
    "import sys, time\n"
    "from ollm_cli.pipeline.recording import _stream\n"
    "if sys.argv[1] == 'whole':\n"
    "    _stream.STREAM_BYTES = 1 << 62\n"
    "from ollm_cli.cli.app import main\n"
    "sys.argv = ['ollm', *sys.argv[2:]]\n"
    "started = time.perf_counter()\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    took = time.perf_counter() - started\n"
    "    status = open('/proc/self/status').read().split('VmHWM:')[1]\n"
    "    rss = int(status.split()[0]) / 1024  # ru_maxrss would count the parent's pages\n"
    "    print(f'MEASURED {took:.3f} {rss:.1f}', file=sys.stderr)\n"
)


def _measured(mode: str, home: Path, *args: str) -> tuple[float, float]:
    """(seconds, peak MB) of ``ollm ARGS`` run as a real process, output discarded."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURED, mode, *args],
        env={**os.environ, "OLLM_HOME": str(home), "PYTHONPATH": str(REPO), "NO_COLOR": "1"},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("MEASURED ")][-1]
    _, took, rss = line.split()
    return float(took), float(rss)


def huge_session(work: Path, words: Words, megabytes: int) -> list[Figure]:
    """List, view and export one session of ``megabytes`` MB, streamed and whole."""
    home = work / "huge-home"
    folder = home / "sessions"
    folder.mkdir(parents=True)
    doc = big_session(words, megabytes * 475, 2000)
    (folder / f"{doc.session_id}.json").write_bytes(doc.encode())
    size = (folder / f"{doc.session_id}.json").stat().st_size / 1e6
    sid = doc.session_id[:8]
    del doc
    _measured("stream", home, "sessions", "reindex")  # what the writer's index holds
    figures: list[Figure] = []
    took, rss = _measured("stream", home, "sessions", "list")
    figures.append(
        Figure(
            f"list with one {size:.0f} MB session",
            f"{took * 1000:.0f} ms, {rss:.0f} MB",
            "(index only)",
            "< 1 s, < 100 MB",
            took < 1 and rss < 100,
        )
    )
    for label, args in (
        ("view", ("sessions", "view", sid)),
        ("export markdown", ("sessions", "export", sid, "--format", "markdown")),
        ("export json", ("sessions", "export", sid, "--format", "json")),
    ):
        print(f"{label} of the huge session, streamed and whole ...")
        took, rss = _measured("stream", home, *args)
        whole_took, whole_rss = _measured("whole", home, *args)
        figures.append(
            Figure(
                f"{label} {size:.0f} MB session",
                f"{took:.1f} s, {rss:.0f} MB",
                f"whole: {whole_took:.1f} s, {whole_rss:.0f} MB",
                "< 1/4 of the memory",
                rss * 4 < whole_rss,
            )
        )
    return figures


def _huge_message_files(work: Path, words: Words, megabytes: int) -> tuple[Path, Path]:
    """A store holding one session whose first message is ``megabytes`` MB of words,
    written straight into its file; and a Claude Code transcript holding the same."""
    block = words.text(100_000) + " "
    text = "zyxomatic " + block * max(1, megabytes * 1_000_000 // len(block))
    stamp = "2025-01-01T00:00:00Z"
    sid = "6f1e2d3c-4b5a-4968-8776-5a4b3c2d1e0f"
    session = {
        "sessionId": sid,
        "startTime": stamp,
        "lastActivity": stamp,
        "model": "llama3.2",
        "provider": "ollama",
        "messages": [
            {"role": "user", "parts": [{"type": "text", "text": text}], "timestamp": stamp},
            {"role": "assistant", "parts": [{"type": "text", "text": "ok"}], "timestamp": stamp},
        ],
        "toolCalls": [],
        "metadata": {"title": "one huge message"},
    }
    store = work / "message-home"
    (store / "sessions").mkdir(parents=True)
    (store / "sessions" / f"{sid}.json").write_bytes(orjson.dumps(session))
    line = {
        "type": "user",
        "uuid": "u1",
        "sessionId": sid,
        "cwd": "/w",
        "timestamp": stamp,
        "message": {"role": "user", "content": text},
    }
    transcript = work / "claude" / f"{sid}.jsonl"
    transcript.parent.mkdir()
    transcript.write_bytes(orjson.dumps(line) + b"\n")
    return store, transcript


def huge_message(work: Path, words: Words, megabytes: int) -> list[Figure]:
    """Search a store holding one message of ``megabytes`` MB (written into its file, and
    imported), against ``ollm sessions list`` of the same store."""
    store, transcript = _huge_message_files(work, words, megabytes)
    figures: list[Figure] = []

    def search_figures(home: Path, how: str) -> None:
        _measured("stream", home, "sessions", "list")  # the index, built
        base_took, base_rss = _measured("stream", home, "sessions", "list")
        for query in ("zyxomatic", "a*"):
            took, rss = _measured("stream", home, "sessions", "search", query)
            figures.append(
                Figure(
                    f"search {query!r}, {megabytes} MB message {how}",
                    f"{took:.2f} s, {rss:.0f} MB",
                    f"list: {base_took:.2f} s, {base_rss:.0f} MB",
                    "< 2x list's time and memory",
                    took < 2 * base_took and rss < 2 * base_rss,
                )
            )

    print(f"search over one {megabytes} MB message written into its file ...")
    took, rss = _measured("stream", store, "sessions", "search", "zyxomatic")
    figures.append(
        Figure(
            f"first search, {megabytes} MB message (index built)",
            f"{took:.2f} s, {rss:.0f} MB",
            "(the file read once, as a stream)",
            "< 100 MB",
            rss < 100,
        )
    )
    search_figures(store, "in its file")
    print(f"import of one {megabytes} MB message, then search ...")
    imported = work / "import-home"
    took, rss = _measured("stream", imported, "sessions", "import", str(transcript))
    size = sum(p.stat().st_size for p in (imported / "sessions").glob("*.json")) / 1e6
    figures.append(
        Figure(
            f"import a {megabytes} MB message",
            f"{took:.2f} s, {rss:.0f} MB; {size:.1f} MB kept",
            f"transcript {transcript.stat().st_size / 1e6:.0f} MB",
            "(no target: the file is read whole)",
            True,
        )
    )
    search_figures(imported, "imported")
    return figures


def main(argv: list[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--huge", type=int, default=0, metavar="MB", help="also one session of MB megabytes"
    )
    parser.add_argument("--only-huge", action="store_true", help="measure only the --huge session")
    parser.add_argument(
        "--huge-message",
        type=int,
        default=0,
        metavar="MB",
        help="also search over one message of MB megabytes (alone with --only-huge)",
    )
    options = parser.parse_args(argv)
    quick = options.quick
    words = Words()
    text = words.text(200)
    figures: list[Figure] = []
    work = _work_dir()
    print(f"work folder: {work}")
    try:
        if options.huge:
            print(f"one {options.huge} MB session ...")
            figures.extend(huge_session(work, words, options.huge))
        if options.huge_message:
            figures.extend(huge_message(work, words, options.huge_message))
        if options.only_huge:
            return _print_table(figures, quick)
        print("recording ...")
        appends = 100 if quick else 500
        before = raw_appends(work, text.encode() + b"\n", appends)
        rate = concurrent_recording(work, 256, 4 if quick else 40, text)
        after = raw_appends(work, text.encode() + b"\n", appends)
        # the faster of the raw runs before and after, so that load favours the baseline
        raw_rate = max(1 / statistics.mean(before), 1 / statistics.mean(after))
        figures.append(
            Figure(
                "durable messages/s, 256 sessions at once",
                f"{rate:,.0f}/s",
                f"raw append+fdatasync {raw_rate:,.0f}/s",
                ">= 1/2 of raw",
                rate >= raw_rate / 2,
            )
        )
        single, raw = single_recording(work, 100 if quick else 500, text)
        raw_p50 = _percentile(raw, 0.5) * 1000
        p50, p99 = _percentile(single, 0.5) * 1000, _percentile(single, 0.99) * 1000
        figures.append(
            Figure(
                "one message recorded, p50 / p99",
                f"{p50:.2f} / {p99:.2f} ms",
                f"raw p50 {raw_p50:.2f} ms (p99 {_percentile(raw, 0.99) * 1000:.2f})",
                "p50 <= raw + 2 ms",
                p50 <= raw_p50 + 2.0,
            )
        )
        print("resume ...")
        messages = 1000 if quick else 10_000
        opened, loads, size = resume(work, big_session(words, messages, 2000), 3 if quick else 7)
        figures.append(
            Figure(
                f"resume {messages:,}-message session ({size / 1e6:.0f} MB)",
                f"{opened:.1f} ms ({opened / loads:.2f}x)",
                f"orjson.loads {loads:.1f} ms",
                "<= 3x",
                opened <= 3 * loads,
            )
        )
        count = 1000 if quick else 10_000
        runs = 5 if quick else 15
        print("listing and search, small sessions ...")
        small = listing_and_search(work / "small", words, count, 2, 200, runs)
        print("listing and search, large sessions ...")
        large = listing_and_search(work / "large", words, count, 20, 1000, runs)
        slowest = max(small["list"], large["list"])
        figures.append(
            Figure(
                f"list {count:,} sessions, small / large",
                f"{small['list']:.1f} / {large['list']:.1f} ms",
                f"full stat scan {small['scan']:.1f} / {large['scan']:.1f} ms",
                "< 100 ms, same for both",
                slowest < 100 and slowest <= 2 * min(small["list"], large["list"]) + 5,
            )
        )
        for label, result in (("small", small), ("large", large)):
            ratio = result["rg"] / result["search"]
            figures.append(
                Figure(
                    f"search {count:,} {label} sessions",
                    f"{result['search']:.2f} ms ({ratio:.0f}x faster)",
                    f"rg -l {result['rg']:.1f} ms",
                    ">= 10x faster",
                    ratio >= 10,
                )
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _print_table(figures, quick)


def _print_table(figures: list[Figure], quick: bool) -> None:
    headers = ("figure", "measured", "baseline (same run)", "target", "result")
    rows = [
        (f.name, f.value, f.baseline, f.target, "PASS" if f.passed else "FAIL") for f in figures
    ]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    print()
    for row in [headers, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    if quick:
        print("\n(--quick: smaller sizes than the targets are stated for)")


if __name__ == "__main__":
    main()
