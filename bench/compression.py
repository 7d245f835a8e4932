"""What token accounting and compression cost, against raw baselines in the same run.

Run with ``python -m bench.compression [--messages N] [--reps N]``.

Figures:

- ``token counting``: a conversation of ``--messages`` messages (1,000 by
  default) is held by a :class:`ConversationTokens`; one more message arrives.
  Its cost (``append``: count the new message, update the total) is compared
  with counting that one message alone with tiktoken (``encode``, the raw
  baseline), and with recounting the whole conversation (what a counter
  without a running total does, cache or not). Every message is new to the
  counter, so nothing comes from the cache. Target: ``append`` at most twice
  the raw count of the one message.
- ``compression``: ``compress`` of a 100-message conversation (truncate, and
  hybrid with an instant summarizer: the service's own work, not the model's),
  and the two calls a turn makes (``should_compress`` and
  ``emergency_truncate``) on the 1,000-message context. Spec 001's target:
  under 2 s for 100 messages.
- ``turn latency``: p50 and p99 of turn latency over a long conversation with a
  summarizer that takes 3 seconds, against compression off (target: at most
  1.1 times); measured through the pipeline coordinator by
  :func:`turn_latency_figure`.
- ``long chat``: a 200-turn conversation at a 2,048-token window through the
  coordinator (simulated model, instant summarizer): the largest request sent
  (tiktoken count of system prompt, checkpoint and messages, never above the
  window), and summarization calls per 100 turns (:func:`long_chat_figure`).
- ``resume``: resuming a compressed 10,000-message session (the store's
  ``open_for_resume`` and the active context built from the latest checkpoint)
  against ``orjson.loads`` of the same file (target: at most 1.5 times), and
  the same session without a checkpoint (:func:`resume_figure`).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

import tiktoken

from ollm_cli.actors.recording import RecordingShell
from ollm_cli.config.settings import CompressionSettings
from ollm_cli.pipeline.compression import ActiveContext
from ollm_cli.pipeline.compression._service import ChatCompressionService, Strategy
from ollm_cli.pipeline.compression._tokens import ConversationTokens, TokenCounter, encoding
from ollm_cli.pipeline.records import SessionMessage, ToolCallPart, ToolResultPart

_VOCABULARY = (
    "the parser returns an error when the value is missing so the build fails and "
    "the test asks the assistant to read the file and fix the function"
)
WORDS = _VOCABULARY.split(" ")


def _text(seed: int, words: int) -> str:
    return " ".join(f"{WORDS[(seed * 7 + k) % len(WORDS)]}{(seed + k) % 97}" for k in range(words))


def conversation(count: int, *, start: int = 0, result_words: int = 200) -> list[SessionMessage]:
    """``count`` messages of a deterministic conversation with tool rounds."""
    messages: list[SessionMessage] = []
    i = start
    while len(messages) < count:
        messages.append(SessionMessage.user(f"question {i}: {_text(i, 25)}"))
        messages.append(
            SessionMessage(
                role="assistant",
                parts=[ToolCallPart(id=f"c{i}", name="read_file", args={"path": f"src/m{i}.py"})],
            )
        )
        messages.append(
            SessionMessage(
                role="tool",
                parts=[
                    ToolResultPart(
                        tool_call_id=f"c{i}", name="read_file", content=_text(i + 1, result_words)
                    )
                ],
            )
        )
        messages.append(SessionMessage.assistant(f"answer {i}: {_text(i + 2, 80)}"))
        i += 1
    return messages[:count]


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def _time(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _append_time(tokens: ConversationTokens, message: SessionMessage) -> float:
    start = time.perf_counter()
    tokens.append(message)
    return time.perf_counter() - start


def _raw_count_time(raw: tiktoken.Encoding, message: SessionMessage) -> float:
    start = time.perf_counter()
    len(raw.encode_ordinary(message.text))
    return time.perf_counter() - start


def token_counting_figure(messages: int, reps: int) -> float:
    """Print the cost of one more message; returns append / raw-count."""
    counter = TokenCounter(persist=False)
    history = conversation(messages)
    tokens = ConversationTokens(counter, history)
    raw = encoding()
    appended: list[float] = []
    baseline: list[float] = []
    recount_cached: list[float] = []
    for rep in range(reps):
        # Two different fresh messages of the same size, neither ever counted before.
        ours = SessionMessage.assistant(f"reply {rep} a: {_text(10_000 + rep, 60)}")
        theirs = SessionMessage.assistant(f"reply {rep} b: {_text(20_000 + rep, 60)}")
        if rep % 2:
            baseline.append(_raw_count_time(raw, theirs))
            appended.append(_append_time(tokens, ours))
        else:
            appended.append(_append_time(tokens, ours))
            baseline.append(_raw_count_time(raw, theirs))
        if rep < 20:
            everything = tokens.messages
            start = time.perf_counter()
            counter.count_messages(everything)
            recount_cached.append(time.perf_counter() - start)
    fresh = TokenCounter(persist=False)
    recount_raw = _time(lambda: fresh.count_messages(history))
    ratio = statistics.median(appended) / statistics.median(baseline)
    print(f"token counting: a {messages}-message conversation, one more message (~70 tokens)")
    print(f"  count that one message (tiktoken encode, raw):  {_median_us(baseline):9.1f} us")
    print(f"  ConversationTokens.append (count + total):      {_median_us(appended):9.1f} us")
    print(f"  recount all, every message from the cache:      {_median_us(recount_cached):9.1f} us")
    print(f"  recount all, no cache:                          {recount_raw * 1e6:9.1f} us")
    verdict = "ok" if ratio <= 2.0 else "OVER TARGET"
    print(f"  append / raw count of the message: {ratio:.2f}x (target <= 2x): {verdict}")
    return ratio


def _instant_summary(prompt: str, max_tokens: int) -> str:
    return (
        "## Goal\nFix the parser.\n## State of the work\nThe lexer is done.\n## Next steps\nTests."
    )


def compression_figure(reps: int) -> None:
    """Print the time of compress, should_compress and emergency_truncate."""
    counter = TokenCounter(persist=False)
    settings = CompressionSettings(preserve_recent=1024)
    hundred = ActiveContext(system_prompt="You are helpful.", messages=conversation(100))
    thousand = ActiveContext(system_prompt="You are helpful.", messages=conversation(1000))
    window = 8192
    print("compression (the service's own work; the summarizer answers at once)")
    strategies: tuple[Strategy, ...] = ("truncate", "hybrid")
    for strategy in strategies:
        samples = []
        result = None
        for _ in range(max(3, reps // 100)):
            fresh = TokenCounter(persist=False)
            service = ChatCompressionService(settings, fresh, _instant_summary)
            start = time.perf_counter()
            result = service.compress(hundred, window=window, strategy=strategy)
            samples.append(time.perf_counter() - start)
        assert result is not None
        print(
            f"  compress 100 messages, {strategy:8s} (cold cache): "
            f"{statistics.median(samples) * 1e3:8.1f} ms "
            f"({result.original_tokens} -> {result.compressed_tokens} tokens; target < 2000 ms)"
        )
    service = ChatCompressionService(settings, counter, _instant_summary)
    service.should_compress(thousand, window=window)  # warm the cache, as a live session has
    should = []
    for _ in range(20):
        start = time.perf_counter()
        service.should_compress(thousand, window=window)
        should.append(time.perf_counter() - start)
    emergency = []
    for _ in range(5):
        start = time.perf_counter()
        service.emergency_truncate(thousand, window=window)
        emergency.append(time.perf_counter() - start)
    should_ms = statistics.median(should) * 1e3
    emergency_ms = statistics.median(emergency) * 1e3
    print(f"  should_compress, 1000 messages (counts cached):    {should_ms:8.2f} ms")
    print(f"  emergency_truncate, 1000 messages (160K tokens):   {emergency_ms:8.2f} ms")


SUMMARY_SECONDS = 3.0


async def _turn_latencies(turns: int, *, compress: bool) -> tuple[list[float], int]:
    """Turn latencies (ms) of one long conversation with the simulated model at
    50 ms, in-process, and how many compressions finished."""
    import tempfile
    from pathlib import Path

    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.runtime import LocalService, create_runtime

    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        home = Path(folder)
        settings = OllmSettings()
        settings.services.session.data_dir = home / "sessions"
        settings.snapshots.data_dir = home / "snapshots"
        settings.provider.name = "simulated"
        settings.provider.simulated.latency_ms = 50
        settings.provider.simulated.output_tokens = 60
        settings.provider.simulated.context_window = 8192
        settings.services.context.load_project_files = False
        settings.services.compression.enabled = compress
        settings.services.compression.preserve_recent = 512
        runtime = create_runtime(settings, home, kind="inprocess")
        await runtime.start()

        def slow_summary(prompt: str, max_tokens: int) -> str:
            time.sleep(SUMMARY_SECONDS)
            return "Goal: answer the questions. State: " + _text(len(prompt), 30)

        for service in runtime.compression:
            assert isinstance(service, LocalService)
            service.obj.service.summarize_fn = slow_summary
        finished = 0

        def count(event: object) -> None:
            nonlocal finished
            finished += 1

        try:
            coordinator = Coordinator(runtime, settings, workspace=home)
            coordinator.events.subscribe(count, {"compression:finished"})
            sid = await coordinator.start_session()
            latencies = []
            for index in range(turns):
                start = time.perf_counter()
                await coordinator.run_turn(sid, f"question {index}: {_text(index, 12)}")
                latencies.append((time.perf_counter() - start) * 1000)
            await coordinator.end_session(sid)
        finally:
            await runtime.shutdown()
        return latencies, finished


def turn_latency_figure(turns: int = 150) -> None:
    """Turn latency p50/p99 with a 3-second summarizer against compression off.

    Both runs are the same conversation with the simulated model at 50 ms, in
    one process; with compression on, summaries run in the background and a
    turn never waits for one (target: at most 1.1 times the latency with
    compression off).
    """
    import asyncio

    off, _ = asyncio.run(_turn_latencies(turns, compress=False))
    on, compressions = asyncio.run(_turn_latencies(turns, compress=True))

    def pct(values: list[float], share: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    print(
        f"turn latency over {turns} turns, simulated model at 50 ms, "
        f"summarizer {SUMMARY_SECONDS:.0f} s:"
    )
    print(
        f"  compression off   p50 {statistics.median(off):7.1f} ms   p99 {pct(off, 0.99):7.1f} ms"
    )
    print(
        f"  compression on    p50 {statistics.median(on):7.1f} ms   p99 {pct(on, 0.99):7.1f} ms"
        f"   ({compressions} compressions finished in the background)"
    )
    p50 = statistics.median(on) / statistics.median(off)
    p99 = pct(on, 0.99) / pct(off, 0.99)
    verdict = "PASS" if max(p50, p99) <= 1.1 else "FAIL"
    print(f"  ratio p50 {p50:.2f}, p99 {p99:.2f} (target <= 1.1): {verdict}")


async def _long_chat(turns: int, window: int) -> tuple[list[int], int, int, int]:
    """Request sizes (tiktoken) of each model request, summarization calls,
    compressions recorded and messages in the file, over ``turns`` turns."""
    import tempfile
    from pathlib import Path

    from ollm_cli.config.settings import OllmSettings
    from ollm_cli.pipeline.coordinator import Coordinator
    from ollm_cli.pipeline.providers import ChatRequest
    from ollm_cli.pipeline.runtime import LocalService, create_runtime

    counter = TokenCounter(persist=False)
    sizes: list[int] = []
    summaries = 0

    def summarize(prompt: str, max_tokens: int) -> str:
        nonlocal summaries
        summaries += 1
        return _instant_summary(prompt, max_tokens) + f"\nTurns so far: {summaries}."

    with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
        home = Path(folder)
        settings = OllmSettings()
        settings.services.session.data_dir = home / "sessions"
        settings.snapshots.data_dir = home / "snapshots"
        settings.provider.name = "simulated"
        settings.provider.simulated.latency_ms = 0
        settings.provider.simulated.output_tokens = 80
        settings.provider.simulated.context_window = window
        settings.services.context.load_project_files = False
        settings.services.compression.preserve_recent = 256
        settings.tools.default_approval = "deny"
        settings.tools.approval = dict.fromkeys(settings.tools.approval, "deny")
        runtime = create_runtime(settings, home, kind="inprocess")
        await runtime.start()
        for service in runtime.compression:
            assert isinstance(service, LocalService)
            service.obj.service.summarize_fn = summarize
        assert isinstance(runtime.provider, LocalService)
        provider = runtime.provider.obj.provider
        chat = provider.chat

        def measured(request: ChatRequest) -> Any:
            size = counter.count_text(request.system_prompt) + counter.count_messages(
                request.messages
            )
            sizes.append(size)
            return chat(request)

        provider.chat = measured
        try:
            coordinator = Coordinator(runtime, settings, workspace=home)
            sid = await coordinator.start_session()
            for index in range(turns):
                await coordinator.run_turn(sid, f"question {index}: {_text(index, 60)}")
            await coordinator.end_session(sid)
            session = await runtime.recording.call(RecordingShell.get_session, sid)
        finally:
            await runtime.shutdown()
    return sizes, summaries, session.metadata.compression_count, len(session.messages)


def long_chat_figure(turns: int = 200, window: int = 2048) -> None:
    """A long conversation at a small window: the largest request, and how often
    the model is asked for a summary."""
    import asyncio

    sizes, summaries, compressions, messages = asyncio.run(_long_chat(turns, window))
    largest = max(sizes)
    verdict = "ok" if largest <= window else "OVER THE WINDOW"
    print(f"long chat: {turns} turns at a {window}-token window (simulated model)")
    print(f"  largest request sent (tiktoken):   {largest:6d} tokens ({verdict})")
    print(f"  median request sent:               {int(statistics.median(sizes)):6d} tokens")
    print(f"  summarization calls per 100 turns: {summaries * 100 / turns:6.1f}")
    print(f"  compressions recorded:             {compressions:6d}")
    print(f"  messages kept in the file:         {messages:6d} (of {2 * turns})")


def _compressed_session_file(folder: Any, messages: int) -> tuple[str, Any, Any]:
    """A 10,000-message session file with a checkpoint as compression records it,
    and the same session without one; returns (session id, both paths)."""
    from ollm_cli.pipeline.recording._checkpoints import messages_digest
    from ollm_cli.pipeline.recording._document import SessionDocument
    from ollm_cli.pipeline.records import Session, now_iso

    history = conversation(messages)
    counter = TokenCounter(persist=False)
    service = ChatCompressionService(
        CompressionSettings(preserve_recent=1024), counter, _instant_summary
    )
    context = ActiveContext(system_prompt="You are helpful.", messages=history)
    result = service.compress(context, window=8192, strategy="hybrid")
    event = result.event
    assert event.checkpoint is not None
    covered = [m.to_dict() for m in history[: event.checkpoint.covers_through]]
    event.checkpoint.fingerprint = messages_digest(covered)
    stamp = now_iso()
    sid = "12345678-1234-4234-8234-123456789abc"
    session = Session(
        session_id=sid,
        start_time=stamp,
        last_activity=stamp,
        model="bench",
        provider="simulated",
        messages=history,
    )
    session.metadata.compression_count = 1
    session.metadata.compression_history = [event]
    plain = session.model_copy(deep=True)
    plain.metadata.compression_count = 0
    plain.metadata.compression_history = []
    paths = []
    for name, which in (("compressed", session), ("plain", plain)):
        path = folder / name / "sessions" / f"{sid}.json"
        path.parent.mkdir(parents=True)
        path.write_bytes(SessionDocument.from_session(which).encode())
        paths.append(path)
    return sid, paths[0], paths[1]


def resume_figure(messages: int = 10_000, reps: int = 7) -> float:
    """Resume of a compressed session against orjson loading its file (as
    ``bench.sessions`` measures a resume: the store is up, the bytes are read);
    returns the ratio."""
    import tempfile
    from pathlib import Path

    import orjson

    from ollm_cli.config.settings import SessionSettings
    from ollm_cli.pipeline.recording import ChatRecordingService

    with tempfile.TemporaryDirectory(dir=Path.cwd()) as name:
        folder = Path(name)
        sid, compressed, plain = _compressed_session_file(folder, messages)

        def resume(path: Path, *, checkpoint: bool) -> tuple[float, int]:
            store = ChatRecordingService(SessionSettings(data_dir=path.parent, max_sessions=0))
            try:
                start = time.perf_counter()
                if checkpoint:
                    point = store.open_for_resume(sid)
                    live = len(ActiveContext.from_resume_point(point, "You are helpful.").messages)
                else:  # what a resume did before checkpoints: every message built
                    live = len(store.open_session(sid).messages)
                took = time.perf_counter() - start
            finally:
                store.close()
            return took, live

        timings: dict[str, list[float]] = {"orjson": [], "compressed": [], "plain": []}
        data = compressed.read_bytes()
        kept = 0
        for _ in range(reps):
            timings["orjson"].append(_time(lambda: orjson.loads(data)))
            took, kept = resume(compressed, checkpoint=True)
            timings["compressed"].append(took)
            timings["plain"].append(resume(plain, checkpoint=False)[0])
        size = len(data)
    base = statistics.median(timings["orjson"])
    ratio = statistics.median(timings["compressed"]) / base
    plain_ratio = statistics.median(timings["plain"]) / base
    print(f"resume: a {messages}-message session ({size / 1e6:.1f} MB)")
    print(f"  orjson.loads of the file's bytes (baseline):      {base * 1e3:8.1f} ms")
    print(
        f"  resume from its checkpoint ({kept} live messages):  "
        f"{statistics.median(timings['compressed']) * 1e3:8.1f} ms  ({ratio:.2f}x)"
    )
    print(
        f"  resume of all messages (no checkpoint):           "
        f"{statistics.median(timings['plain']) * 1e3:8.1f} ms  ({plain_ratio:.2f}x)"
    )
    verdict = "ok" if ratio <= 1.5 else "OVER TARGET"
    print(f"  compressed resume / orjson load: {ratio:.2f}x (target <= 1.5x): {verdict}")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    encoding().encode_ordinary("warm up")
    logging.getLogger("ollm_cli.pipeline.compression._service").setLevel(
        logging.ERROR
    )  # cut-at-once warnings
    token_counting_figure(args.messages, args.reps)
    print()
    compression_figure(args.reps)
    print()
    turn_latency_figure()
    print()
    long_chat_figure()
    print()
    resume_figure()


if __name__ == "__main__":
    main()
